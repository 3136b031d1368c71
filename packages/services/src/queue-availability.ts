import { queueUnavailable, withTimeout } from "@tern/core";
import type { QueueDeps } from "./deps.ts";

const DEFAULT_QUEUE_TIMEOUT_MS = 5_000;

/**
 * Producers fail fast while their connection is down, rather than hold a request (or a
 * transaction) open until the time limit.
 */
export const assertQueueReady = (deps: Pick<QueueDeps, "redis">): void => {
  if (deps.redis.status !== "ready") throw queueUnavailable();
};

/**
 * Runs one call on the job queue under the producers' rule: refused at once while the connection
 * is down, given up after a time limit, and whatever fails becomes the one UnavailableError every
 * producer gives (the cause goes to the log, with `context`).
 */
export const withJobQueue = async <T>(
  deps: QueueDeps,
  call: () => Promise<T>,
  context: Record<string, unknown> = {},
): Promise<T> => {
  assertQueueReady(deps);
  const ms = deps.queueTimeoutMs ?? DEFAULT_QUEUE_TIMEOUT_MS;
  try {
    return await withTimeout(call(), ms, `the job queue gave no answer within ${ms} ms`);
  } catch (err) {
    deps.logger.warn({ err, ...context }, "the job queue refused or did not answer");
    throw queueUnavailable();
  }
};
