import { healthMetrics, type Logger, startPeriodicTask } from "@tern/core";
import { type Database, startTasksRepository } from "@tern/db";
import { liveWorkers, type WorkerEndpoint } from "@tern/queue";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";

/** How often the gauges are brought up to date, and how often a stranded start is logged again. */
const LOOK_EVERY_MS = 15_000;
const LOG_EVERY_MS = 60_000;

export interface WorkerPresence {
  /** The workers alive now, as they advertise themselves in Redis (the worker directory). */
  workers: () => Promise<WorkerEndpoint[]>;
  /** Looks now (after the look under way, if any): a start was just accepted with no worker alive. */
  lookNow: () => void;
  stop: () => Promise<void>;
}

/**
 * Whether any worker is alive to take the starts this API accepts. A start is accepted all the
 * same while none is (a worker may be on its way), but never silently: its task says it waits
 * (`detail`), `tern_workers_alive` and `tern_starts_waiting_for_worker` say so as soon as it is
 * accepted (`lookNow`), and a log line repeats it every minute until a worker arrives.
 */
export const startWorkerPresence = (deps: {
  db: Kysely<Database>;
  redis: Pick<Redis, "zrangebyscore" | "mget">;
  prefix: string;
  logger: Logger;
}): WorkerPresence => {
  const workers = () => liveWorkers(deps.redis, deps.prefix);
  let loggedAt = 0;
  let hadNone = false;
  const look = async () => {
    const alive = (await workers()).length;
    const waiting = await startTasksRepository(deps.db).countWaitingForWorker();
    healthMetrics.workersAlive.set(alive);
    healthMetrics.startsWaitingForWorker.set(waiting);
    if (alive === 0 && waiting > 0 && Date.now() - loggedAt >= LOG_EVERY_MS) {
      loggedAt = Date.now();
      hadNone = true;
      deps.logger.warn(
        { waiting },
        `${waiting} start(s) wait for a worker, and none is alive: start one (pnpm --filter @tern/worker start, or ./scripts/start.sh)`,
      );
    } else if (alive > 0 && hadNone) {
      hadNone = false;
      loggedAt = 0;
      deps.logger.info({ alive }, "a worker is alive again: the waiting starts are taken");
    }
  };
  // One look at a time; a look asked for while one runs follows it once, however often it was asked.
  const looking = startPeriodicTask("looking for live workers", look, {
    everyMs: LOOK_EVERY_MS,
    logger: deps.logger,
  });
  return {
    workers,
    lookNow: () => void looking.tickNow(),
    stop: looking.stop,
  };
};
