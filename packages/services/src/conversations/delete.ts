import { conversationsRepository } from "@tern/db";
import { enqueue } from "@tern/queue";
import type { ConversationDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";
import { withJobQueue } from "../queue-availability.ts";
import { engineOf } from "./sandbox-of.ts";

/**
 * Asks a worker to stop and remove the conversation's sandbox; its record and events are kept. A
 * conversation whose sandbox is already gone needs no job.
 */
export const deleteConversation = async (
  deps: ConversationDeps,
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  // The conversation's session key ends with it, whatever becomes of the sandbox.
  await conversationsRepository(deps.db).revokeSessionKey(conversation.id);
  if (conversation.sandboxStatus === "MISSING") return;
  // To the engine that holds the sandbox: only its workers can remove it.
  const engineId = await engineOf(deps, conversation);
  await withJobQueue(
    deps,
    () => enqueue(deps.queues, "sandbox.remove", { conversationId: conversation.id }, { engineId }),
    { conversation_id: conversation.id },
  );
};
