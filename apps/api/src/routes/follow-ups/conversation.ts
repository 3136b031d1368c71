import { z } from "@hono/zod-openapi";
import { AppError, type Conversation, parseId } from "@tern/core";
import { conversationsRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import type { Principal } from "../../middleware/auth.ts";
import { errorSchema } from "../records.ts";

export const conversationIdParam = z.object({
  conversation_id: z
    .string()
    .openapi({ param: { name: "conversation_id", in: "path" }, example: "0f8fad5bd9cb469fa16570867728950e" }),
});

/** OpenHands' answer to a command: `{"success": true}`. */
export const successSchema = z.object({ success: z.boolean() }).openapi("Success");

export const enqueueFailedResponse = {
  503: {
    description: "The job queue is unreachable; nothing was changed",
    content: { "application/json": { schema: errorSchema } },
  },
} as const;

export const conflictResponse = (description: string) =>
  ({ 409: { description, content: { "application/json": { schema: errorSchema } } } }) as const;

/** The caller's conversation, or 404 (also for another user's). */
export const ownedConversation = async (deps: ApiDeps, principal: Principal, raw: string): Promise<Conversation> => {
  const id = parseId(raw);
  const notFound = new AppError("not_found", "No such conversation");
  if (id === null) throw notFound;
  const [conversation] = await conversationsRepository(deps.db).findForUser(principal.userId, [id]);
  if (!conversation) throw notFound;
  return conversation;
};

export const queueUnavailable = () =>
  new AppError("service_unavailable", "The job queue is unreachable; try again shortly");

const ENQUEUE_TIMEOUT_MS = 5_000;

/** Adds a job, or 503 at once when Redis is down (producers fail fast). */
export const enqueueOr503 = async <T>(deps: ApiDeps, add: () => Promise<T>): Promise<T> => {
  if (deps.redis.status !== "ready") throw queueUnavailable();
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      add(),
      new Promise<T>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ENQUEUE_TIMEOUT_MS} ms`)), ENQUEUE_TIMEOUT_MS);
      }),
    ]);
  } catch (err) {
    deps.logger.warn({ err }, "could not enqueue");
    throw queueUnavailable();
  } finally {
    clearTimeout(timer);
  }
};

export const sandboxGone = (c: Conversation) => c.sandboxStatus === "MISSING" || c.sandboxStatus === "ERROR";
