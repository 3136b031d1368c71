import type { Conversation, Sandbox } from "@tern/core";
import { conversationsRepository, sandboxesRepository } from "@tern/db";
import type { ServiceDeps } from "./deps.ts";

/**
 * What a session key opens. Two kinds of record hold one (each looked up by the key's SHA-256):
 * - a conversation: its `session_api_key`, revoked when the conversation is deleted;
 * - a sandbox made on its own (POST /api/v1/sandboxes): its own key, which opens that sandbox.
 * Every place that takes a session key (the app routes, the page, a sandbox's settings, the
 * agent-server mount) asks here, then decides what that holder may do.
 */
export type SessionKeyHolder =
  | { kind: "conversation"; conversation: Conversation }
  | { kind: "sandbox"; sandbox: Sandbox & { userId: string } };

/**
 * The holder of `key`, or null when no live record holds it. `conversationsOnly`: a sandbox's own
 * key is not looked for (the app routes take only conversations' keys), saving the second read.
 */
export const holderOfSessionKey = async (
  deps: Pick<ServiceDeps, "db">,
  key: string,
  opts: { conversationsOnly?: boolean } = {},
): Promise<SessionKeyHolder | null> => {
  const conversation = await conversationsRepository(deps.db).findBySessionKey(key);
  if (conversation) return { kind: "conversation", conversation };
  if (opts.conversationsOnly) return null;
  const sandbox = await sandboxesRepository(deps.db).findBySessionKey(key);
  // A sandbox row always has its user once its key exists; one without is no holder.
  return sandbox?.userId ? { kind: "sandbox", sandbox: { ...sandbox, userId: sandbox.userId } } : null;
};

/** The user and conversation a holder acts for (a sandbox of its own: its conversation, else itself). */
export const sessionOf = (
  holder: SessionKeyHolder,
): { userId: string; conversationId: string; sandboxId: string | null } =>
  holder.kind === "conversation"
    ? {
        userId: holder.conversation.userId,
        conversationId: holder.conversation.id,
        sandboxId: holder.conversation.sandboxId,
      }
    : {
        userId: holder.sandbox.userId,
        conversationId: holder.sandbox.conversationId ?? holder.sandbox.id,
        sandboxId: holder.sandbox.id,
      };
