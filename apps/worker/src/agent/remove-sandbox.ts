import type { Logger } from "@tern/core";
import { conversationsRepository, type Database, sandboxesRepository } from "@tern/db";
import type { SandboxDriver } from "@tern/sandbox";
import type { Kysely } from "kysely";

/**
 * Stops and removes a conversation's container and marks its sandbox MISSING; the events stay.
 * A run still working on the conversation finds the sandbox MISSING at its next tool call and
 * ends in `error`. Safe to repeat: a missing container is not an error.
 */
export const removeConversationSandbox = async (
  deps: { db: Kysely<Database>; sandboxes: Pick<SandboxDriver, "destroy">; logger: Logger },
  conversationId: string,
): Promise<void> => {
  const conversation = await conversationsRepository(deps.db).get(conversationId);
  if (!conversation?.sandboxId) return;
  const sandboxes = sandboxesRepository(deps.db);
  const sandbox = await sandboxes.get(conversation.sandboxId);
  if (!sandbox) return;
  await deps.sandboxes.destroy(sandbox.containerId ?? sandbox.containerName);
  await sandboxes.update(sandbox.id, { status: "MISSING" });
  deps.logger.info({ conversation_id: conversationId, sandbox_id: sandbox.id }, "sandbox removed");
};
