import { spawnBareHono } from "../../bare-hono-process.ts";
import type { BenchContext } from "../../context.ts";
import { type BenchRow, row } from "../../report.ts";
import type { Deployment, StartOutcome } from "../../starts.ts";
import { type LatencySummary, since, summarize, tailKeys, tailText } from "../../stats.ts";
import type { ReadyEnvironment } from "./environment.ts";
import { rawThroughput } from "./floors.ts";
import { fromPool, hitRate, isFromPool, removeAll, sequentialStarts, stageMedians } from "./outcomes.ts";

/** Between two starts from the pool: time for it to refill (create + start + warm-up exec, on a loaded engine). */
const POOL_PACE_MS = 1_200;

/**
 * A warm start's round trip against a bare HTTP POST's: the API's claim (key, quota, one statement,
 * the answer) may cost this many bare round trips. On an idle machine the bare one is 1-2 ms and the
 * target warm p50 is 15 ms.
 */
const WARM_RTT_MAX_RATIO = 8;

/** SANDBOX_POOL_MAX of the self-sizing pool the burst and steady rows run against. */
const POOL_MAX = 12;

/** Warm starts one at a time, and claims with refills running: enough for a p99 (P99_MIN_SAMPLES) in a full run. */
/** The gate takes a median: a dozen starts give it (it runs beside the whole suite, so it stays small). */
const WARM_SAMPLES = { full: 200, quick: 20, gate: 12 } as const;

/** SANDBOX_POOL_SIZE of the pool rows (and of each worker in the throughput rows). */
const POOL_SIZE = 2;

interface SteadyRun {
  perSec: number;
  /** The starts the pool served, after the warm-up: each claimed while refills ran beside it. */
  hits: StartOutcome[];
  /** Those of `hits` the API claimed itself (answered READY); the rest a worker served after the queue. */
  claims: StartOutcome[];
  /** Percent of the measured starts (after the warm-up) the pool served. */
  hitRate: number;
  detail: Record<string, unknown>;
}

interface Rates {
  engineRate: number;
  serialRate: number;
}

/**
 * Starts at a steady rate, open loop, unless `perSec` is given: above `serialRate` (one raw
 * create+start+exec after another: about what a pool of fixed size, refilling one sandbox at a
 * time, serves), 1.1 × it, but within 0.7 × `engineRate` (8 creates in flight, measured right
 * before: every start uses up a sandbox, so no pool serves a rate the engine cannot refill), and
 * at least 0.6 × `engineRate`. On two cores the two are close. The fixed pool's own run beside it
 * shows its hit rate at the same rate. The first 10 s are the pool's
 * warm-up (its arrival rate is an average, and growing takes refills); the hit rate is over the
 * starts after them, the steady state.
 */
const steadyRun = async (
  ctx: BenchContext,
  d: Deployment,
  n: number,
  rates: Rates,
  perSec = Math.max(0.5, 0.6 * rates.engineRate, Math.min(1.1 * rates.serialRate, 0.7 * rates.engineRate)),
): Promise<SteadyRun> => {
  // A quick run (the test suite's) proves the row is produced, not the rate it reports: a third of
  // the warm-up and 10 starts. A full run's 30 or more keep one engine stall to 3-7 % of the result.
  const warmup = Math.ceil(perSec * (ctx.quick ? 3 : 10));
  // A full run's claims give a p99 (200 of them or more); the misses among them are few.
  const measured = ctx.quick ? 10 : Math.max(220, 2 * n);
  const intervalMs = 1000 / perSec;
  const all = await d.paced(warmup + measured, intervalMs, (i) => ({ title: `steady ${i}` }));
  await removeAll(ctx, d, all);
  const counted = all.slice(warmup);
  const hits = counted.filter(isFromPool);
  const rate = hitRate(counted);
  return {
    perSec,
    hitRate: rate,
    hits,
    claims: hits.filter((o) => o.answeredReady),
    detail: {
      perSec,
      ...rates,
      intervalMs,
      warmupStarts: warmup,
      starts: counted.length,
      fromPool: hits.length,
      hitRate: rate,
      // Which starts missed (0: the first after the warm-up): early ones mean the pool still grew.
      misses: counted.flatMap((o, i) => (isFromPool(o) ? [] : [i])),
      warmupFromPool: fromPool(all.slice(0, warmup)),
      // Server side, beside the client time each start records.
      server: summarize(counted.map((o) => o.serverMs)),
    },
  };
};

interface PoolRun {
  warm: StartOutcome[];
  /** A bare HTTP POST's round trip (bare Hono, its own process), one right before each warm start. */
  bareRtt: number[];
  /** Bursts of the pool's size at once against a full pool: every start should be a warm one. */
  sizeBurstRun: StartOutcome[];
  burstRun: StartOutcome[];
  warmBeforeBurst: number[];
  /** Null in a gate run, which measures the warm start's round trip alone. */
  steady: SteadyRun | null;
  /** The same rate against a pool of fixed size; not in a quick run, which proves only that the rows are made. */
  fixedSteady: SteadyRun | null;
  rates: Rates | null;
  /** The cold run's floor, which the one-at-a-time pool row is shown beside. */
  floor: LatencySummary;
}

/**
 * Warm pool, self-sizing (SANDBOX_POOL_MAX above its size): a burst of twice its size at once;
 * one start at a time, paced so the pool has refilled; a steady rate faster than a pool of fixed
 * size refills. Then, in a full run, the same rate against a pool of fixed size (SANDBOX_POOL_MAX
 * unset): what self-sizing adds.
 */
const poolStarts = async (ctx: BenchContext, env: ReadyEnvironment, floor: LatencySummary): Promise<PoolRun> => {
  let d = await env.deployment(1, POOL_SIZE, { SANDBOX_POOL_MAX: String(POOL_MAX) });
  let warm: StartOutcome[];
  let bareRtt: number[];
  const burstRun: StartOutcome[] = [];
  const sizeBurstRun: StartOutcome[] = [];
  const warmBeforeBurst: number[] = [];
  let steady: SteadyRun;
  let rates: Rates;
  try {
    // Burst: 2 × pool size at once against a full pool, first, while it is at its floor (later
    // rounds find it as big as the bursts before grew it: `warmBeforeBurst`). Past its size the
    // burst is cold: the pool grows on the claims it sees, but a refill takes as long as a cold start.
    const burstSize = 2 * POOL_SIZE;
    if (ctx.gate) {
      ({ warm, bareRtt } = await warmOneAtATime(ctx, d));
      return {
        warm,
        bareRtt,
        sizeBurstRun,
        burstRun,
        warmBeforeBurst,
        steady: null,
        fixedSteady: null,
        rates: null,
        floor,
      };
    }
    // A burst of the pool's size, first, while the pool is at its floor: all of it from the pool.
    for (let round = 0; round < (ctx.quick ? 1 : 10); round++) {
      await d.waitWarm(ctx.sandboxes, POOL_SIZE);
      const { outcomes } = await d.burst(POOL_SIZE, (i) => ({ title: `size burst ${i}` }));
      sizeBurstRun.push(...outcomes);
      await removeAll(ctx, d, outcomes);
    }
    for (let round = 0; round < (ctx.quick ? 1 : 10); round++) {
      // At least the pool size; more when an earlier burst grew it.
      warmBeforeBurst.push(await d.waitWarm(ctx.sandboxes, POOL_SIZE));
      const { outcomes } = await d.burst(burstSize, (i) => ({ title: `burst ${i}` }));
      burstRun.push(...outcomes);
      await removeAll(ctx, d, outcomes);
    }

    ({ warm, bareRtt } = await warmOneAtATime(ctx, d));

    const rawSpan = await rawThroughput(ctx, 8, 8, env.network, 100);
    rates = { engineRate: 8 / (rawSpan / 1000), serialRate: 1000 / floor.p50 };
    steady = await steadyRun(ctx, d, env.n, rates);
  } finally {
    await d.stop();
  }
  let fixedSteady: SteadyRun | null = null;
  if (!ctx.quick) {
    d = await env.deployment(1, POOL_SIZE);
    try {
      await d.waitWarm(ctx.sandboxes, POOL_SIZE);
      fixedSteady = await steadyRun(ctx, d, env.n, rates, steady.perSec);
    } finally {
      await d.stop();
    }
  }
  return { warm, bareRtt, sizeBurstRun, burstRun, warmBeforeBurst, steady, fixedSteady, rates, floor };
};

/**
 * Warm starts one at a time, paced so the pool has refilled, each right after a bare HTTP POST's round
 * trip with the same body to a bare Hono process: the floor of a start the API answers READY itself.
 */
const warmOneAtATime = async (ctx: BenchContext, d: Deployment) => {
  const n = ctx.gate ? WARM_SAMPLES.gate : ctx.quick ? WARM_SAMPLES.quick : WARM_SAMPLES.full;
  const bare = await spawnBareHono(JSON.stringify({ id: "0".repeat(32), status: "READY" }));
  try {
    const post = async () => {
      const t = performance.now();
      const res = await fetch(`${bare.url}/api/v1/app-conversations`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ title: "bench" }),
      });
      await res.text();
      return since(t);
    };
    for (let i = 0; i < 5; i++) await post();
    await d.startOne({ title: "warm-up" });
    await new Promise((r) => setTimeout(r, 1_000));
    const run = await sequentialStarts(
      ctx,
      d,
      n,
      () => ({ title: "bench" }),
      POOL_PACE_MS,
      () => post(),
    );
    return { warm: run.outcomes, bareRtt: run.floor };
  } finally {
    await bare.stop();
  }
};

const oneAtATimeRows = ({ warm, bareRtt, floor }: PoolRun): BenchRow[] => {
  const warmS = summarize(warm.map((o) => o.clientMs));
  const bareS = summarize(bareRtt);
  const detail = {
    client: warmS,
    server: summarize(warm.map((o) => o.serverMs)),
    stages: stageMedians(warm),
    coldFloor: floor,
    bareRtt: bareS,
    poolSize: POOL_SIZE,
    paceMs: POOL_PACE_MS,
    fromPool: fromPool(warm),
    answeredReady: warm.filter((o) => o.answeredReady).length,
  };
  return [
    ...(["p50", ...tailKeys(warmS, true)] as const).map((p) =>
      row({
        id: `ready.pool.${p}`,
        label: `time to READY, warm pool, ${p}`,
        unit: "ms",
        value: warmS[p],
        // A warm start makes no container: the cold floor is not its floor. Its targets are absolute
        // (READY in the POST's answer): p50 ≤ 15 ms, p99 ≤ 40 ms.
        ...(p === "p50" ? { absolute: 15 } : p === "p99" ? { absolute: 40 } : {}),
        detail: p === "p50" ? detail : {},
      }),
    ),
    // The same p50 beside a bare HTTP round trip measured right before each start: what the API's
    // claim adds to a POST the machine answers anyway.
    row({
      id: "ready.pool.rtt",
      label: "warm start round trip p50 against a bare HTTP POST's",
      unit: "ms",
      value: warmS.p50,
      floor: bareS.p50,
      floorLabel: "bare Hono POST round trip, interleaved",
      maxRatio: WARM_RTT_MAX_RATIO,
      detail: { bareRtt: bareS, client: warmS },
    }),
  ];
};

/**
 * The warm starts of the steady run: each claimed while the pool's refills (creates) ran beside
 * it on the same engine and machine. Same targets as one at a time: refills must not slow a claim.
 * The claims are the starts the API answered READY: a start that found no warm row
 * went to the queue, and when a worker then gave it a warm sandbox its time is a queued start's, not
 * a claim's; those are counted apart, by server time.
 */
const refillingRows = ({ steady }: PoolRun): BenchRow[] => {
  if (!steady) return [];
  const queued = steady.hits.filter((o) => !o.answeredReady);
  const s = summarize(steady.claims.map((o) => o.clientMs));
  return (["p50", ...tailKeys(s, false)] as const).map((p) =>
    row({
      id: `ready.pool.refilling.${p}`,
      label: `time to READY, warm pool, with refills running (steady rate), ${p}`,
      unit: "ms",
      value: s[p],
      ...(p === "p50" ? { absolute: 15 } : p === "p99" ? { absolute: 40 } : {}),
      detail:
        p === "p50"
          ? {
              client: s,
              starts: steady.hits.length,
              answeredReady: steady.claims.length,
              queuedThenWarm: { starts: queued.length, server: summarize(queued.map((o) => o.serverMs)) },
              perSec: steady.perSec,
            }
          : {},
    }),
  );
};

const sizeBurstRow = ({ sizeBurstRun }: PoolRun): BenchRow =>
  row({
    id: "ready.burst.pool_size.hit_rate",
    label: `burst of the pool's size (${POOL_SIZE}) at once, served from the pool`,
    unit: "%",
    value: hitRate(sizeBurstRun),
    better: "higher-is-better",
    absolute: 100,
    detail: {
      starts: sizeBurstRun.length,
      fromPool: fromPool(sizeBurstRun),
      answeredReady: sizeBurstRun.filter((o) => o.answeredReady).length,
      client: summarize(sizeBurstRun.map((o) => o.clientMs)),
    },
  });

const burstRows = ({ burstRun, warmBeforeBurst }: PoolRun): BenchRow[] => {
  const burstS = summarize(burstRun.map((o) => o.clientMs));
  const burstDetail = {
    client: burstS,
    server: summarize(burstRun.map((o) => o.serverMs)),
    stages: stageMedians(burstRun),
    poolSize: POOL_SIZE,
    poolMax: POOL_MAX,
    burst: 2 * POOL_SIZE,
    warmBeforeBurst,
    starts: burstRun.length,
    fromPool: fromPool(burstRun),
  };
  return [
    ...(["p50", ...tailKeys(burstS, false)] as const).map((p) =>
      row({
        id: `ready.burst.${p}`,
        label: `time to READY, burst of 2 × pool size, ${p}`,
        unit: "ms",
        value: burstS[p],
        detail: p === "p50" ? burstDetail : {},
      }),
    ),
    row({
      id: "ready.burst.hit_rate",
      label: "burst of 2 × pool size, served from the pool",
      unit: "%",
      value: hitRate(burstRun),
      better: "higher-is-better",
      detail: { starts: burstRun.length, fromPool: fromPool(burstRun) },
    }),
  ];
};

const steadyRow = ({ steady, fixedSteady }: PoolRun): BenchRow[] =>
  !steady
    ? []
    : [
        row({
          id: "ready.steady.hit_rate",
          label: `steady start rate (${steady.perSec.toFixed(1)}/s), served from the self-sizing pool`,
          unit: "%",
          value: steady.hitRate,
          better: "higher-is-better",
          absolute: 95,
          detail: { ...steady.detail, fixedPool: fixedSteady?.detail ?? null },
        }),
      ];

/** The warm pool's rows: one start at a time, bursts, and a steady rate (self-sizing against fixed). */
export const poolRows = async (
  ctx: BenchContext,
  env: ReadyEnvironment,
  floor: LatencySummary,
): Promise<BenchRow[]> => {
  const run = await poolStarts(ctx, env, floor);
  const { warm, bareRtt, burstRun, steady, fixedSteady, rates } = run;
  const warmS = summarize(warm.map((o) => o.clientMs));
  ctx.progress(
    `pool start to READY: p50 ${warmS.p50.toFixed(1)} ms, ${tailText(warmS)} (${fromPool(warm)}/${warm.length} from the pool, ${warm.filter((o) => o.answeredReady).length} READY in the POST's answer; a bare HTTP POST p50 ${summarize(bareRtt).p50.toFixed(2)} ms beside them); stages ${JSON.stringify(stageMedians(warm))}`,
  );
  if (!steady || !rates) return oneAtATimeRows(run);
  const refillS = summarize(steady.claims.map((o) => o.clientMs));
  ctx.progress(
    `pool start with refills running: p50 ${refillS.p50.toFixed(1)} ms, ${tailText(refillS)} (${steady.claims.length} of ${steady.hits.length} hits answered READY by the API); burst of ${POOL_SIZE}: ${hitRate(run.sizeBurstRun).toFixed(0)} % from the pool`,
  );
  const burstS = summarize(burstRun.map((o) => o.clientMs));
  ctx.progress(
    `burst of ${2 * POOL_SIZE} on a pool of ${POOL_SIZE}: p50 ${burstS.p50.toFixed(0)} ms, ${tailText(burstS)}, hit rate ${hitRate(burstRun).toFixed(0)} %`,
  );
  ctx.progress(
    `steady ${steady.perSec.toFixed(1)} starts/s (engine ${rates.engineRate.toFixed(1)}/s with 8 in flight, ${rates.serialRate.toFixed(1)}/s one at a time): hit rate ${steady.hitRate.toFixed(1)} % self-sizing (max ${POOL_MAX})${fixedSteady ? `, ${fixedSteady.hitRate.toFixed(1)} % at a fixed size of ${POOL_SIZE}` : ""}`,
  );
  return [...oneAtATimeRows(run), ...refillingRows(run), sizeBurstRow(run), ...burstRows(run), ...steadyRow(run)];
};
