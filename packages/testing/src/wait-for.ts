import { scaled } from "./time-scale.ts";

type Truthy<T> = Exclude<T, false | null | undefined | 0 | "">;

export interface WaitForOptions {
  /** What the test waits for, in words: the failure says "timed out after N ms waiting for <what>". */
  what: string;
  /** The deadline (default 30 s), on the reference machine: scaled to this one's (time-scale.ts). */
  timeoutMs?: number;
  /**
   * The deadline bounds in-process work (a cache, a timer, a Redis key's TTL), not Docker's: it is
   * taken as written, never stretched by TERN_TEST_TIME_SCALE, which stands for a slower engine.
   */
  inProcess?: boolean;
  /** Time between two checks (default 50 ms). */
  intervalMs?: number;
  /** Appended to the failure: what the test saw last (a status, a process's output). */
  detail?: () => string | Promise<string>;
}

/**
 * The one way a test waits: `check` is asked again and again until it returns something truthy,
 * which is returned; past the deadline the test fails naming `what`. A check that throws fails the
 * wait at once (it saw a state that will not change, such as a start task in ERROR).
 *
 * Wait for a state to be reached, never for time to pass: to prove that something did NOT happen,
 * wait for a later thing that proves the system had its chance (a later event, a drained queue,
 * one more janitor round) and then read the state.
 */
export const waitFor = async <T>(check: () => T | Promise<T>, opts: WaitForOptions): Promise<Truthy<T>> => {
  const timeoutMs = opts.inProcess ? (opts.timeoutMs ?? 30_000) : scaled(opts.timeoutMs ?? 30_000);
  const intervalMs = opts.intervalMs ?? 50;
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value as Truthy<T>;
    const left = started + timeoutMs - Date.now();
    if (left <= 0) {
      const detail = opts.detail ? `\n${await opts.detail()}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, left)));
  }
};
