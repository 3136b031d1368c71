import type { SandboxDriver } from "@tern/sandbox";
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from "kysely";
import type { WorkerDeps } from "../deps.ts";

/**
 * Where one start's time goes, per stage: milliseconds waiting on Postgres (each statement, from
 * its compile, which includes waiting for a pooled connection, to its result) and on the sandbox
 * engine (each driver call). What is neither is the worker's own (git on the worker, CPU). Kept
 * beside the stages' durations as `db:STAGE` and `engine:STAGE`, so the bench shows the gap.
 */
interface StageClock {
  /** The stage time is counted to now: set before the stage's own entry is written. */
  stage: string;
  db: Record<string, number>;
  engine: Record<string, number>;
}

export const newStageClock = (): StageClock => ({ stage: "WORKING", db: {}, engine: {} });

const add = (into: Record<string, number>, stage: string, ms: number) => {
  into[stage] = (into[stage] ?? 0) + ms;
};

/** The figures of one finished stage, as stage_durations keeps them (whole ms). */
export const timingsOf = (clock: StageClock, stage: string): Record<string, number> => ({
  [`db:${stage}`]: Math.round(clock.db[stage] ?? 0),
  [`engine:${stage}`]: Math.round(clock.engine[stage] ?? 0),
});

class DbTimer implements KyselyPlugin {
  readonly #clock: StageClock;
  readonly #started = new WeakMap<object, { t: number; stage: string }>();
  constructor(clock: StageClock) {
    this.#clock = clock;
  }
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.#started.set(args.queryId, { t: performance.now(), stage: this.#clock.stage });
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const s = this.#started.get(args.queryId);
    if (s) add(this.#clock.db, s.stage, performance.now() - s.t);
    return args.result;
  }
}

/** Calls outside any stage's path (the snapshot's commit runs beside later stages): not counted. */
const untimed = new Set(["prepare", "close", "commit", "listImages", "removeImage", "containmentState"]);

const timedDriver = (driver: SandboxDriver, clock: StageClock): SandboxDriver => {
  const wrapped: Record<string, unknown> = { ...driver };
  for (const [name, fn] of Object.entries(driver)) {
    if (typeof fn !== "function" || untimed.has(name)) continue;
    wrapped[name] = async (...args: unknown[]) => {
      const stage = clock.stage;
      const t = performance.now();
      try {
        return await (fn as (...a: unknown[]) => Promise<unknown>).apply(driver, args);
      } finally {
        add(clock.engine, stage, performance.now() - t);
      }
    };
  }
  return wrapped as unknown as SandboxDriver;
};

/** The worker's deps for one start, its database and engine calls counted on `clock`. */
export const timedDeps = (deps: WorkerDeps, clock: StageClock): WorkerDeps => ({
  ...deps,
  db: deps.db.withPlugin(new DbTimer(clock)),
  sandboxes: timedDriver(deps.sandboxes, clock),
});
