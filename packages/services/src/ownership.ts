import { type Conversation, NotFoundError, parseId, type StartTask } from "@tern/core";
import { conversationsRepository, startTasksRepository } from "@tern/db";
import type { ServiceDeps } from "./deps.ts";

/**
 * Who asks. Every resource belongs to the user who created it; a session key (a conversation's
 * session_api_key) reaches that one conversation only, so `conversationId` is set for it.
 * The API's Principal has this shape.
 */
export interface Caller {
  userId: string;
  conversationId?: string;
}

/** A well-formed id that the caller's credential reaches: any for a key, its own for a session key. */
const reachable = (caller: Caller, id: string | null): id is string =>
  id !== null && (caller.conversationId === undefined || id === caller.conversationId);

/**
 * The caller's conversations among `rawIds` (32 hex or uuid), in the order asked: null where an id
 * is malformed, unknown or not the caller's (the three are never told apart).
 */
export const ownedConversations = async (
  deps: Pick<ServiceDeps, "db">,
  caller: Caller,
  rawIds: readonly string[],
): Promise<(Conversation | null)[]> => {
  const wanted = rawIds.map(parseId);
  const allowed = (id: string | null): id is string => reachable(caller, id);
  const found = await conversationsRepository(deps.db).findForUser(caller.userId, wanted.filter(allowed));
  const byId = new Map(found.map((c) => [c.id, c]));
  return wanted.map((id) => (allowed(id) ? (byId.get(id) ?? null) : null));
};

/**
 * The id of a conversation the caller may be able to read, checked without the database:
 * NotFoundError when malformed or not a session key's own. Whether the user owns it is left to the
 * caller's own query (EventFilter.ownerId), which confirms with ownedConversation when it finds nothing.
 */
export const conversationIdFor = (caller: Caller, rawId: string): string => {
  const id = parseId(rawId);
  if (!reachable(caller, id)) throw new NotFoundError("No such conversation");
  return id;
};

/** The caller's conversation, or NotFoundError (also for another user's). */
export const ownedConversation = async (
  deps: Pick<ServiceDeps, "db">,
  caller: Caller,
  rawId: string,
): Promise<Conversation> => {
  const [conversation] = await ownedConversations(deps, caller, [rawId]);
  if (!conversation) throw new NotFoundError("No such conversation");
  return conversation;
};

/** The user's start tasks among `rawIds`, in the order asked; null where malformed, unknown or not theirs. */
export const ownedStartTasks = async (
  deps: Pick<ServiceDeps, "db">,
  userId: string,
  rawIds: readonly string[],
): Promise<(StartTask | null)[]> => {
  const wanted = rawIds.map(parseId);
  const found = await startTasksRepository(deps.db).findForUser(
    userId,
    wanted.filter((id): id is string => id !== null),
  );
  const byId = new Map(found.map((t) => [t.id, t]));
  return wanted.map((id) => (id === null ? null : (byId.get(id) ?? null)));
};
