import { setTimeout as sleepFor } from "node:timers/promises";
import { type LlmClient, LlmError, type LlmRetryWait } from "./types.ts";

export interface RetryPolicy {
  /** The most a call may wait for its retries in all, in ms (LLM_RETRY_MAX_WAIT); past it the call fails. */
  maxWaitMs: number;
  /** The first backoff, doubled at each retry up to `maxBackoffMs` (default 4 s, as OpenHands' 8 s halved by the jitter). */
  baseBackoffMs?: number;
  /** The longest one backoff (default 64 s, OpenHands' retry_max_wait). */
  maxBackoffMs?: number;
  /** For tests: a wait (default: a timer that the call's signal cuts short). */
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
  /** For tests: a number in [0, 1) (default Math.random), the jitter's draw. */
  random?: () => number;
}

const wordOf: Record<LlmRetryWait["reason"], string> = {
  rate_limited: "rate-limited",
  overloaded: "overloaded",
  server_error: "failing",
  network: "unreachable",
};

/**
 * The backoff before retry `attempt` (1 for the first): exponential, with "equal jitter" (half
 * fixed, half drawn) so that the runs a provider's limit stopped together do not retry together.
 */
export const backoffMs = (attempt: number, base: number, cap: number, random: () => number): number => {
  const ceiling = Math.min(cap, base * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (ceiling / 2) * random());
};

/**
 * `client`, retrying each call that fails for a reason retrying may cure (LlmError.transient: a
 * 429, a 529 or another 5xx, a lost connection): after the provider's Retry-After when it gives
 * one, else after an exponential backoff with jitter, each wait told to the call's `onRetryWait`
 * first. A call gives up, with the last failure and how long it waited, once its waits would pass
 * `maxWaitMs` in all; a wait is cut short when the call's signal aborts.
 */
export const withRetries = (client: LlmClient, policy: RetryPolicy): LlmClient => {
  const base = policy.baseBackoffMs ?? 4_000;
  const cap = policy.maxBackoffMs ?? 64_000;
  const random = policy.random ?? Math.random;
  const sleep = policy.sleep ?? ((ms, signal) => sleepFor(ms, undefined, signal ? { signal } : undefined));
  return {
    provider: client.provider,
    model: client.model,
    async complete(request, signal, hooks) {
      let waited = 0;
      let backoffs = 0;
      for (let attempt = 1; ; attempt++) {
        try {
          return await client.complete(request, signal, hooks);
        } catch (err) {
          if (!(err instanceof LlmError) || !err.transient || signal?.aborted) throw err;
          const left = policy.maxWaitMs - waited;
          const asked = err.retryAfterMs;
          // A provider that asks for longer than is left is not waited for at all: the run ends now.
          if (left <= 0 && waited === 0) throw err; // no retries at all
          if (left <= 0 || (asked !== null && asked > left)) throw givenUp(err, waited, asked);
          // The backoff doubles with each backoff; a wait the provider named does not count.
          const waitMs = asked ?? Math.min(left, backoffMs(++backoffs, base, cap, random));
          await hooks?.onRetryWait?.({
            attempt,
            waitMs,
            reason: err.transient,
            status: err.status,
            retryAfter: asked !== null,
            message: err.message,
          });
          await sleep(waitMs, signal);
          waited += waitMs;
        }
      }
    },
  };
};

/** The failure that ends a call whose retries are spent, saying how long it waited. */
const givenUp = (err: LlmError, waitedMs: number, askedMs: number | null): LlmError => {
  const reason = err.transient ?? "server_error";
  const waited = `after ${Math.round(waitedMs / 1000)} s of retries`;
  const asked =
    askedMs !== null ? `; it asks to wait ${Math.ceil(askedMs / 1000)} s more, past LLM_RETRY_MAX_WAIT` : "";
  return new LlmError(`${err.message} (the model is ${wordOf[reason]}: gave up ${waited}${asked})`, err.status, {
    cause: err,
  });
};

/** The page's and the log's words for a wait: "the model is rate-limited; retrying in 32 s". */
export const retryWaitText = (wait: Pick<LlmRetryWait, "reason" | "waitMs">): string =>
  `the model is ${wordOf[wait.reason]}; retrying in ${Math.max(1, Math.round(wait.waitMs / 1000))} s`;
