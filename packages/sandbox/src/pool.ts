import { randomBytes } from "node:crypto";
import { type Logger, type PeriodicTask, startPeriodicTask } from "@tern/core";
import {
  type ExecOptions,
  type SandboxDriver,
  type SandboxInfo,
  SandboxLabel,
  type SandboxPool,
  type SandboxSpec,
} from "./driver.ts";
import { createArrivalRate, createRefillEstimate, poolTarget } from "./pool-sizing.ts";
import type { WarmPoolStore } from "./pool-store.ts";

/** The worker instance whose pool made the sandbox (see `PoolOwnerLabel` in the janitor). */
export const PoolOwnerLabel = "tern.pool_owner";

export interface ClaimOwner {
  taskId: string;
  sandboxId: string;
}

export interface SandboxPoolOptions {
  /**
   * Warm sandboxes kept started ahead, at least (SANDBOX_POOL_SIZE). 0 makes a pool that never has
   * one, whatever `max` says.
   */
  size: number;
  /**
   * At most this many (SANDBOX_POOL_MAX; default `size`, a pool of fixed size). Above `size`, the
   * pool grows with the rate starts arrive at (see `sizing`), so a steady rate finds a warm one.
   */
  max?: number;
  /**
   * Creates a pool growing above `size` runs at once (SANDBOX_POOL_PARALLEL_CREATES; default 2). More
   * than the engine's host has cores for only slows each of them and every claim beside them (their
   * disk writes hold up Postgres' commits): measured on 2 cores, uncapped growth served claims at p95
   * 100-200 ms and missed more of them than two at a time did (p95 40-66 ms).
   */
  parallelCreates?: number;
  sizing?: {
    /** The arrival rate is an average over about this long (default 30 s). */
    windowMs?: number;
    /** Head room over `rate × refill time` (default 3: at 2 a loaded engine's stalls left 75-80 % hits). */
    safety?: number;
    /** A warm sandbox above the target is removed after the pool has not needed it this long (default 60 s). */
    shrinkAfterMs?: number;
  };
  /** The clock of the sizing (arrivals, refill times, shrinking); tests bring their own. */
  now?: () => number;
  /** The deployment (REDIS_PREFIX): goes into the namespace label and the sandbox names. */
  namespace: string;
  /** This worker instance; pool sandboxes carry it so the janitor can tell whose they are. */
  ownerId: string;
  /** Image, limits and env of every pool sandbox (names and labels are the pool's). */
  spec: Omit<SandboxSpec, "name" | "labels"> & { labels?: Record<string, string> };
  /**
   * Run in every sandbox before it counts as warm (e.g. making the empty workspace a start
   * without a repository needs), so a claim hands over a sandbox that needs no exec of its own.
   * A non-zero exit discards the sandbox.
   */
  prepare?: ExecOptions;
  /**
   * An image that holds what `prepare` makes already (its result committed), or null while there is
   * none: a warm sandbox is then made from it and `prepare` is not run, one exec less of the engine's
   * time per refill beside the claims. A create from it that fails (the image was removed
   * underneath) makes that sandbox from `spec.image` with `prepare` after all, and tells
   * `onPreparedImageFailed`.
   */
  preparedImage?: () => string | null;
  onPreparedImageFailed?: (image: string, err: unknown) => void;
  /**
   * Records the new owner of a claimed sandbox, durably (the sandboxes row: labels are fixed when
   * a sandbox is made; Docker cannot relabel a running container). Runs before `claim` resolves;
   * when it throws, the sandbox is destroyed (it may be half-recorded) and the error reaches the
   * caller.
   */
  onClaim?: (info: SandboxInfo, owner: ClaimOwner) => Promise<void>;
  /**
   * Whether a sandbox this owner's pool made was claimed (it belongs to a conversation now). Given,
   * `start` removes the unclaimed sandboxes an earlier process of the same owner id left behind (one
   * killed, then restarted under the same WORKER_ID): their owner looks alive to the janitor, so
   * nothing else would. Claimed ones are left to their conversations.
   */
  isClaimed?: (info: SandboxInfo) => Promise<boolean>;
  /**
   * Records each warm sandbox as a row others claim (the API, in a start's transaction). Given, a
   * sandbox is the pool's to hand out or remove only while `take` says its row was unclaimed, and
   * the pool looks every `syncMs` for rows claimed elsewhere: those leave the pool (not removed:
   * they are a conversation's now) and count as arrivals, and the refill starts at once.
   */
  store?: WarmPoolStore;
  /** How often the pool looks for rows claimed elsewhere (default 200 ms). */
  syncMs?: number;
  /** Called every `heartbeatMs` while the pool runs: proves the owner alive to the janitor. */
  heartbeat?: () => Promise<void>;
  heartbeatMs?: number;
  /** How often the pool checks that its warm sandboxes still run (default 30 s). */
  checkEveryMs?: number;
  logger?: Logger;
}

export interface WarmSandboxPool extends SandboxPool {
  /** Warm sandboxes ready to be claimed now. */
  available(): number;
  /** Resolves when `size` sandboxes are warm (or rejects after `timeoutMs`). */
  whenFull(timeoutMs?: number): Promise<void>;
  /** The size the pool keeps itself at now: `size` at rest, up to `max` while starts arrive fast. */
  target(): number;
}

/** Names every driver accepts (Docker's: [a-zA-Z0-9][a-zA-Z0-9_.-]*). */
const nameSafe = (s: string): string => s.replace(/[^a-zA-Z0-9_.-]/g, "-");

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** How often a pool above its floor looks again at its target (the rate decays between claims). */
const RESIZE_EVERY_MS = 1_000;

/**
 * A per-process pool of started sandboxes. Each worker claims only entries of its own, popped
 * from memory in one synchronous step, so two start jobs never get the same sandbox and two
 * workers never share one. A claimed sandbox leaves the pool for good: it is never handed out
 * again, whatever happens to its conversation. Replenishing runs in the background, one create
 * at a time while the pool is at its floor, so warm-up competes with cold starts for one driver
 * call at most; above it (starts arriving faster), as many at once as the target lacks, up to
 * `parallelCreates`.
 *
 * Its size follows the arrival rate: `poolTarget` of the claims per second (a moving average)
 * and the measured refill time, between `size` and `max`. It grows at once and shrinks slowly: a
 * warm sandbox above the target goes only after the target has stayed below the pool for
 * `shrinkAfterMs`, one at a time.
 */
export const createSandboxPool = (driver: SandboxDriver, opts: SandboxPoolOptions): WarmSandboxPool => {
  const ready: SandboxInfo[] = [];
  /** When each ready sandbox's row was written: a sync read begun before it cannot have seen it. */
  const addedAt = new Map<string, number>();
  const store = opts.store;
  const syncMs = opts.syncMs ?? 200;
  let lastSync = Date.now();
  let creating = 0;
  let running = false;
  let stopped = false;
  let wake: (() => void) | null = null;
  let loop: Promise<void> | null = null;
  let heartbeat: PeriodicTask | null = null;
  let lastCheck = Date.now();
  const fullWaiters: (() => void)[] = [];
  const log = opts.logger;
  const prefix = `tern-pool-${nameSafe(opts.namespace)}-${nameSafe(opts.ownerId).slice(0, 24)}`;

  const now = opts.now ?? Date.now;
  const min = Math.max(0, opts.size);
  const max = min > 0 ? Math.max(min, opts.max ?? min) : 0;
  const parallelCreates = Math.max(1, opts.parallelCreates ?? 2);
  const safety = opts.sizing?.safety ?? 3;
  const shrinkAfterMs = opts.sizing?.shrinkAfterMs ?? 60_000;
  const arrivals = createArrivalRate({ windowMs: opts.sizing?.windowMs ?? 30_000 });
  const refill = createRefillEstimate();
  /** Since when the pool has held more warm sandboxes than its target (null: not above it). */
  let surplusSince: number | null = null;

  const target = (): number =>
    max <= min ? min : poolTarget({ ratePerSec: arrivals.perSec(now()), refillMs: refill.get(), min, max, safety });

  const labels = (): Record<string, string> => ({
    ...opts.spec.labels,
    [SandboxLabel.Marker]: "1",
    [SandboxLabel.Namespace]: opts.namespace,
    [SandboxLabel.Pool]: "1",
    [PoolOwnerLabel]: opts.ownerId,
  });

  const notifyFull = () => {
    if (ready.length < min) return;
    for (const w of fullWaiters.splice(0)) w();
  };

  const kick = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  const createOne = async (): Promise<void> => {
    creating++;
    const startedAt = now();
    const name = `${prefix}-${randomBytes(6).toString("hex")}`;
    try {
      const prepared = opts.preparedImage?.() ?? null;
      const fromPrepared = prepared
        ? await driver.create({ ...opts.spec, image: prepared, name, labels: labels() }).catch(async (err) => {
            opts.onPreparedImageFailed?.(prepared, err);
            await driver.destroy(name).catch(() => undefined);
            return null;
          })
        : null;
      const info = fromPrepared ?? (await driver.create({ ...opts.spec, name, labels: labels() }));
      if (opts.prepare && !fromPrepared && !stopped) {
        const r = await driver.exec(info.ref, opts.prepare);
        if (r.exitCode !== 0) throw new Error(`warm-up exited ${r.exitCode}: ${(r.stderr || r.stdout).slice(-300)}`);
      }
      if (stopped) {
        await driver.destroy(info.ref).catch(() => undefined);
        return;
      }
      refill.add(now() - startedAt);
      if (store) {
        await store.add(info);
        addedAt.set(info.name, Date.now());
      }
      ready.push(info);
      notifyFull();
    } catch (err) {
      // It may exist half-made; it is ours to remove.
      await driver.destroy(name).catch(() => undefined);
      throw err;
    } finally {
      creating--;
    }
  };

  /** Drops entries whose sandbox stopped or vanished (an operator, the OOM killer...). */
  const dropDead = async (): Promise<void> => {
    lastCheck = Date.now();
    const mine = await driver.list({ [SandboxLabel.Pool]: "1", [PoolOwnerLabel]: opts.ownerId });
    const live = new Set(mine.filter((c) => c.state === "running").map((c) => c.ref));
    for (let i = ready.length - 1; i >= 0; i--) {
      const entry = ready[i] as SandboxInfo;
      if (!live.has(entry.ref)) {
        ready.splice(i, 1);
        addedAt.delete(entry.name);
        // Claimed elsewhere meanwhile: its conversation's first run finds it dead and replaces it.
        if (store && !(await store.take(entry))) continue;
        log?.warn({ sandbox: entry.name }, "warm sandbox is gone; replacing it");
        await driver.destroy(entry.ref).catch(() => undefined);
      }
    }
    await store?.touch(ready.map((r) => r.name));
  };

  /** Entries whose rows a claim elsewhere took leave the pool (they are a conversation's now). */
  const syncClaims = async (): Promise<void> => {
    if (!store) return;
    const began = Date.now();
    lastSync = began;
    const unclaimed = await store.unclaimed();
    for (let i = ready.length - 1; i >= 0; i--) {
      const entry = ready[i] as SandboxInfo;
      if (unclaimed.has(entry.name) || (addedAt.get(entry.name) ?? 0) >= began) continue;
      ready.splice(i, 1);
      addedAt.delete(entry.name);
      arrivals.record(now());
      log?.debug({ sandbox: entry.name }, "warm sandbox claimed by a start's transaction");
    }
  };

  /**
   * Removes one warm sandbox once the pool has held more than its target for `shrinkAfterMs`;
   * the next one goes another `shrinkAfterMs` later, if the target is still below.
   */
  const shrink = async (goal: number): Promise<void> => {
    if (ready.length <= goal) {
      surplusSince = null;
      return;
    }
    const t = now();
    surplusSince ??= t;
    if (t - surplusSince < shrinkAfterMs) return;
    surplusSince = t;
    // Taken out synchronously, so no claim can get it while it is destroyed.
    const idle = ready.shift() as SandboxInfo;
    addedAt.delete(idle.name);
    if (store && !(await store.take(idle))) return;
    log?.debug({ sandbox: idle.name, target: goal }, "warm sandbox not needed; removing it");
    await driver
      .destroy(idle.ref)
      .catch((err) => log?.warn({ err, sandbox: idle.name }, "removing a warm sandbox failed"));
  };

  const replenish = async (): Promise<void> => {
    let backoff = 500;
    let retryAt = 0;
    const checkEvery = opts.checkEveryMs ?? 30_000;
    const inFlight = new Set<Promise<void>>();
    while (running) {
      try {
        if (Date.now() - lastCheck >= checkEvery) await dropDead();
      } catch (err) {
        log?.warn({ err }, "listing warm sandboxes failed");
      }
      try {
        if (store && Date.now() - lastSync >= syncMs) await syncClaims();
      } catch (err) {
        lastSync = Date.now();
        log?.warn({ err }, "reading the warm rows failed");
      }
      const goal = target();
      // At rest one create at a time, as a fixed pool; above its floor, what the target lacks, up to
      // `parallelCreates` at once, or a pool growing for a steady rate would lag it by a refill per
      // missing sandbox.
      const parallel = goal > min ? Math.min(goal, parallelCreates) : 1;
      if (ready.length + creating < goal && creating < parallel && Date.now() >= retryAt) {
        const p: Promise<void> = createOne()
          .then(
            () => {
              backoff = 500;
            },
            (err) => {
              log?.warn({ err, backoffMs: backoff }, "warm sandbox create failed");
              retryAt = Date.now() + backoff;
              backoff = Math.min(backoff * 2, 30_000);
            },
          )
          .finally(() => {
            inFlight.delete(p);
            kick();
          });
        inFlight.add(p);
        continue;
      }
      if (creating === 0) await shrink(goal);
      // Nothing to start now: sleep until a claim or a create wakes us, a retry or the next health
      // check is due, or (above the floor) the target may have moved.
      let napMs = Math.max(10, checkEvery - (Date.now() - lastCheck));
      if (retryAt > Date.now()) napMs = Math.min(napMs, retryAt - Date.now());
      if (goal > min || ready.length > min) napMs = Math.min(napMs, RESIZE_EVERY_MS);
      if (store) napMs = Math.min(napMs, Math.max(0, syncMs - (Date.now() - lastSync)));
      await Promise.race([sleep(Math.max(10, napMs)), new Promise<void>((r) => (wake = r))]);
    }
    await Promise.all(inFlight);
  };

  /** Removes what an earlier process under this owner id left warm (see `isClaimed`). */
  const removeLeftovers = async (): Promise<void> => {
    // Rows first, so no claim takes a sandbox about to be removed; a claimed row stays (its sandbox too).
    await store?.removeAll();
    const isClaimed = opts.isClaimed;
    if (!isClaimed) return;
    const mine = await driver.list({
      [SandboxLabel.Namespace]: opts.namespace,
      [SandboxLabel.Pool]: "1",
      [PoolOwnerLabel]: opts.ownerId,
    });
    for (const c of mine) {
      if (ready.some((r) => r.ref === c.ref) || (await isClaimed(c))) continue;
      await driver.destroy(c.ref).catch((err) => log?.warn({ err, sandbox: c.name }, "removing a leftover failed"));
      log?.info({ sandbox: c.name, state: c.state }, "removed a warm sandbox an earlier process of this worker left");
    }
  };

  return {
    async start() {
      if (running || stopped) return;
      // Even with no pool now: what a predecessor of this id left warm is ours to remove.
      await removeLeftovers();
      if (min <= 0) return;
      running = true;
      if (opts.heartbeat) {
        const beat = opts.heartbeat;
        await beat();
        const everyMs = opts.heartbeatMs ?? 10_000;
        heartbeat = startPeriodicTask("pool heartbeat", beat, {
          everyMs,
          firstAfterMs: everyMs,
          ...(log ? { logger: log } : {}),
        });
      }
      loop = replenish();
    },

    async claim(owner) {
      // Every start that looks counts towards the rate, hit or miss: a miss is demand the pool lacked.
      if (running) arrivals.record(now());
      // Synchronous pop: no other claim in this process can see the same entry; the store's take
      // then settles it against claims elsewhere (the API's).
      let info = ready.shift();
      while (info && store) {
        addedAt.delete(info.name);
        if (await store.take(info)) break;
        info = ready.shift();
      }
      kick();
      if (!info) return null;
      try {
        await opts.onClaim?.(info, owner);
      } catch (err) {
        await driver.destroy(info.ref).catch(() => undefined);
        throw err;
      }
      log?.debug({ sandbox: info.name, task_id: owner.taskId }, "warm sandbox claimed");
      return info;
    },

    async stop() {
      if (stopped) return;
      stopped = true;
      running = false;
      const beating = heartbeat?.stop();
      kick();
      await loop?.catch(() => undefined);
      await beating;
      const leftovers = ready.splice(0);
      await Promise.all(
        leftovers.map(async (c) => {
          // One a start's transaction claimed is its conversation's: left running.
          if (store && !(await store.take(c).catch(() => true))) return;
          await driver.destroy(c.ref).catch(() => undefined);
        }),
      );
      for (const w of fullWaiters.splice(0)) w();
    },

    available: () => ready.length,

    target: () => (running ? target() : 0),

    whenFull(timeoutMs = 60_000) {
      if (ready.length >= min || min <= 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`pool not full after ${timeoutMs} ms`)), timeoutMs);
        fullWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    },
  };
};
