import { isDomainError, type Logger } from "@tern/core";
import { WebSocketServer } from "ws";
import type { Principal } from "../../middleware/auth.ts";
import { holdsNul } from "../../middleware/nul-characters.ts";
import { type RateLimiter, rateKeyOf } from "../../middleware/rate-limit.ts";

/**
 * What a client may send on an event socket (the app server's and the agent server's) is held to
 * what a POST of the same message is: 1 MiB a frame (the body limit), the `messages` rate budget
 * for each frame (not only at the socket's opening), no NUL character, and a refusal that says
 * what the client did wrong, never what failed inside.
 */

/** The largest body a request may carry (but the agent server's upload, streamed), and the largest frame. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** The server the sockets upgrade through: a larger frame closes its socket (1009) unread. */
export const createSocketServer = () => new WebSocketServer({ noServer: true, maxPayload: MAX_BODY_BYTES });

/** Why a client frame is not acted on, in words the client may read; null: act on it. */
export const refusalOfFrame = async (
  limiter: RateLimiter | null,
  principal: Principal,
  text: string,
): Promise<{ code: string; detail: string } | null> => {
  if (holdsNul(text)) {
    return { code: "ValidationError", detail: "A message must not contain NUL characters (U+0000)" };
  }
  const verdict = limiter ? await limiter.check(rateKeyOf(principal), "messages") : null;
  if (verdict?.refused) {
    return {
      code: "RateLimited",
      detail: `Rate limit exceeded: at most ${verdict.limit} messages per minute; retry in ${verdict.resetSeconds} s`,
    };
  }
  return null;
};

/** A failure to act on a frame, as the client reads it: a domain error's own message, else nothing of the internals. */
export const frameFailure = (
  err: unknown,
  logger: Logger,
  context: Record<string, unknown>,
): { code: string; detail: string } => {
  if (isDomainError(err)) return { code: err.code, detail: err.message };
  logger.error({ err, ...context }, "a socket message could not be acted on");
  return { code: "internal", detail: "Internal error" };
};
