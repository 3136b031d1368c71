import type { Logger } from "./logger.ts";

export interface PeriodicTaskOptions {
  /**
   * The pause between the end of one tick and the start of the next (ticks never overlap), or a
   * function asked before each pause, for a pause that changes (a backoff).
   */
  everyMs: number | (() => number);
  /** The pause before the first tick; 0 (the default): at once. */
  firstAfterMs?: number;
  /** Where a lapse (a tick that threw) is logged, as `<name> failed`, with its error. */
  logger?: Pick<Logger, "warn">;
  /** Instead of the log: a lapse handed to the task's owner, which reports it its own way. */
  onLapse?: (err: unknown) => void;
}

export interface PeriodicTask {
  /**
   * A tick now, or right after the one under way (asks made meanwhile share that one tick); the
   * regular pause starts again after it. Resolves once it ended: a failure is a lapse, never thrown.
   */
  tickNow: () => Promise<void>;
  /** No tick starts after this; resolves once the one under way, if any, ended. */
  stop: () => Promise<void>;
}

/**
 * THE ONE WAY A PROCESS RUNS SOMETHING AGAIN AND AGAIN (a sweep, a relay, a heartbeat, a refresh):
 * one tick at a time, the next one `everyMs` after the last ended, a tick that throws logged as a
 * lapse (the task goes on: the next tick is its retry), and a stop that waits for the tick under
 * way, so nothing of the task outlives its owner's shutdown. Its timer never keeps a process alive
 * by itself.
 */
export const startPeriodicTask = (
  name: string,
  tick: () => Promise<unknown>,
  opts: PeriodicTaskOptions,
): PeriodicTask => {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | null = null;
  let asked: Promise<void> | null = null;

  const lapse = (err: unknown) => {
    if (opts.onLapse) opts.onLapse(err);
    else opts.logger?.warn({ err, task: name }, `${name} failed`);
  };
  const pause = () => (typeof opts.everyMs === "function" ? opts.everyMs() : opts.everyMs);

  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(() => void runTick(), ms);
    timer.unref();
  };

  const runTick = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    const current: Promise<void> = Promise.resolve()
      .then(tick)
      .then(() => undefined, lapse)
      .finally(() => {
        running = null;
        // A tick asked for meanwhile follows at once; it schedules the next one itself.
        if (!asked) schedule(pause());
      });
    running = current;
    return current;
  };

  schedule(opts.firstAfterMs ?? 0);

  return {
    tickNow: () => {
      if (stopped) return Promise.resolve();
      if (!running) return runTick();
      asked ??= running.then(() => {
        asked = null;
        return stopped ? undefined : runTick();
      });
      return asked;
    },
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await asked;
      await running;
    },
  };
};
