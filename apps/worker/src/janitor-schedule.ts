import { randomBytes } from "node:crypto";
import { type Logger, metrics, startPeriodicTask } from "@tern/core";
import type { Redis } from "ioredis";

/**
 * The janitor's schedule lives in every worker, not in Redis: each worker ticks a local timer, and
 * a Redis lock with a TTL lets one sweep run at a time across workers. The janitor exists to repair
 * what Redis lost (jobs, liveness keys), so it must not be lost with them: a BullMQ job scheduler
 * stored in Redis is deleted by the same FLUSHDB, failover or restart without persistence. After
 * such a loss the lock is gone too, and the next worker to tick takes it.
 *
 * The lock also spaces sweeps: its holder keeps it while the sweep runs (renewed), then leaves it
 * to expire one interval after the sweep began, so the workers together sweep about once an
 * interval, however many there are.
 */
/** One lock per engine: each engine's janitor sweeps its own containers (a driver with no engine: one lock). */
export const janitorLockKey = (prefix: string, engineId: string | null): string =>
  `${prefix}:janitor:lock${engineId ? `@${engineId}` : ""}`;
/** Each sweep's beginning and end is published here ({ phase, runId, workerId }), for watchers. */
export const janitorEventsChannel = (prefix: string): string => `${prefix}:janitor:events`;

/**
 * How long a sweep holds the lock without a renewal: a worker killed mid-sweep frees it after this.
 * One interval, as the schedule would space the next sweep anyway (a worker killed mid-sweep must not
 * hold the janitor off longer than that), within 5 s (renewed every third of it, with room for a
 * loaded event loop) and 30 s.
 */
const runningLockTtlMs = (intervalMs: number): number => Math.min(30_000, Math.max(5_000, intervalMs));

// Compare-and-set: only the holder of the lock renews, shortens or drops it.
const EXTEND_IF_OURS = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`;
const DELETE_IF_OURS = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`;

export interface JanitorScheduleOptions<R> {
  redis: Redis;
  prefix: string;
  /** The engine this worker drives (null: a driver without affinity). */
  engineId?: string | null;
  workerId: string;
  intervalMs: number;
  logger: Logger;
  /** One sweep. */
  sweep: () => Promise<R>;
  onSwept?: (report: R, ms: number) => void;
}

export interface JanitorSchedule {
  /**
   * Runs a sweep now when no other worker holds the lock; resolves once it is done (false: another
   * worker's sweep ran or is running, or one of this worker's is).
   */
  tick: () => Promise<boolean>;
  stop: () => Promise<void>;
}

export const startJanitorSchedule = <R>(opts: JanitorScheduleOptions<R>): JanitorSchedule => {
  const { redis, prefix, workerId, logger } = opts;
  const key = janitorLockKey(prefix, opts.engineId ?? null);
  const runningTtlMs = runningLockTtlMs(opts.intervalMs);
  let running: Promise<boolean> | null = null;
  let stopped = false;

  const publish = (phase: "begin" | "end", runId: string, extra: Record<string, unknown> = {}) =>
    redis
      .publish(janitorEventsChannel(prefix), JSON.stringify({ phase, runId, workerId, ...extra }))
      .catch(() => undefined);

  const sweepUnderLock = async (): Promise<boolean> => {
    const token = `${workerId}:${randomBytes(8).toString("hex")}`;
    const took = await redis.set(key, token, "PX", runningTtlMs, "NX");
    if (took !== "OK") return false;
    const began = Date.now();
    const renew = setInterval(() => {
      redis.eval(EXTEND_IF_OURS, 1, key, token, runningTtlMs).catch(() => undefined);
    }, runningTtlMs / 3);
    await publish("begin", token);
    let ok = false;
    try {
      const report = await opts.sweep();
      ok = true;
      opts.onSwept?.(report, Date.now() - began);
    } catch (err) {
      logger.warn({ err }, "janitor sweep failed");
    } finally {
      clearInterval(renew);
      // The next sweep is due one interval after this one began: the lock stays until then.
      const rest = opts.intervalMs - (Date.now() - began);
      await (rest > 0
        ? redis.eval(EXTEND_IF_OURS, 1, key, token, rest)
        : redis.eval(DELETE_IF_OURS, 1, key, token)
      ).catch(() => undefined);
      metrics.janitorSweeps.inc({ outcome: ok ? "ok" : "failed" });
      metrics.janitorSweepDuration.observe((Date.now() - began) / 1000);
      await publish("end", token, { ok });
    }
    return true;
  };

  const tick = (): Promise<boolean> => {
    if (stopped) return Promise.resolve(false);
    // One of this worker's sweeps at a time, whatever the lock says (it may have been lost mid-sweep).
    if (running) return Promise.resolve(false);
    running = sweepUnderLock()
      .catch((err) => {
        logger.warn({ err }, "janitor lock unavailable; the next tick tries again");
        return false;
      })
      .finally(() => {
        running = null;
      });
    return running;
  };

  // Ticks are one SET NX each: a few per interval keep the gap between sweeps near the interval.
  const tickEveryMs = Math.max(100, Math.floor(opts.intervalMs / 4));
  const ticking = startPeriodicTask("janitor tick", tick, { everyMs: tickEveryMs, firstAfterMs: tickEveryMs, logger });
  return {
    tick,
    async stop() {
      stopped = true;
      await ticking.stop();
      await running;
    },
  };
};
