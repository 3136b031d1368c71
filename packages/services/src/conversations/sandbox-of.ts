import { type Conversation, type Sandbox, sandboxRunError } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import type { ConversationDeps } from "../deps.ts";

/** The conversation's sandbox row, when it has one. */
const sandboxOf = async (deps: Pick<ConversationDeps, "db">, c: Conversation): Promise<Sandbox | null> =>
  c.sandboxId ? sandboxesRepository(deps.db).get(c.sandboxId) : null;

/** A run in a conversation whose sandbox is gone is refused, saying why (sandbox-state.ts). */
export const refuseRun = async (deps: Pick<ConversationDeps, "db">, c: Conversation): Promise<never> => {
  throw sandboxRunError(await sandboxOf(deps, c));
};

/**
 * The engine of the conversation's sandbox, whose queue its runs go to (null: no affinity). A
 * run waits there while no worker of that engine is alive, and goes on when one is back.
 */
export const engineOf = async (deps: Pick<ConversationDeps, "db">, c: Conversation): Promise<string | null> =>
  (await sandboxOf(deps, c))?.engineId ?? null;
