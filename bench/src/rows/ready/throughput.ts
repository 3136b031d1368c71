import type { BenchContext } from "../../context.ts";
import { type BenchRow, row } from "../../report.ts";
import { dockerMs, type StartOutcome } from "../../starts.ts";
import { summarize } from "../../stats.ts";
import type { ReadyEnvironment } from "./environment.ts";
import { rawThroughput } from "./floors.ts";
import { fromPool, removeAll, stageMedians } from "./outcomes.ts";

/**
 * Throughput: bursts of starts against `workers` worker processes (empty pool, default concurrency). Its
 * floor, the engine's own ceiling on this machine with as many raw starts in flight as 2
 * workers run (2 × WORKER_CONCURRENCY 4), is interleaved: a raw burst of the same size right
 * before each of the service's, so both see the same load even as it drifts.
 */
export const throughputRow = async (
  ctx: BenchContext,
  env: ReadyEnvironment,
  workers: number,
  poolSize: number,
): Promise<BenchRow> => {
  const rounds = ctx.quick ? 1 : 3;
  const burst = ctx.quick ? 8 : 20;
  const d = await env.deployment(workers, poolSize);
  try {
    const rawSpans: number[] = [];
    const spans: number[] = [];
    const outcomes: StartOutcome[] = [];
    for (let round = 0; round < rounds; round++) {
      if (poolSize > 0) await d.waitWarm(ctx.sandboxes, workers * poolSize);
      rawSpans.push(await rawThroughput(ctx, burst, 8, env.network, round));
      const sampler = setInterval(() => {
        void d.workerRss().then(
          (v) => ctx.rss.worker.load.push(...v),
          () => undefined,
        );
      }, 200);
      try {
        const result = await d.burst(burst, (i) => ({ title: `burst ${i}` }));
        spans.push(result.spanMs);
        outcomes.push(...result.outcomes);
        await removeAll(ctx, d, result.outcomes);
      } finally {
        clearInterval(sampler);
      }
    }
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const rate = (rounds * burst) / (sum(spans) / 1000);
    const rawRate = (rounds * burst) / (sum(rawSpans) / 1000);
    // In a burst this includes waiting for a free slot (WORKER_CONCURRENCY) behind the other starts.
    const queuedAndOverhead = summarize(outcomes.map((o) => o.serverMs - dockerMs(o)));
    ctx.progress(
      `throughput, ${workers} worker(s): ${rate.toFixed(1)} starts/s against raw ${rawRate.toFixed(1)}/s beside it; queued+overhead p50 ${queuedAndOverhead.p50.toFixed(0)} ms`,
    );
    return row({
      id: `throughput.w${workers}`,
      label: `start throughput, ${workers} worker${workers > 1 ? "s" : ""} (${rounds} × burst of ${burst})`,
      unit: "starts/s",
      value: rate,
      floor: rawRate,
      floorLabel: "raw create+start+exec ×8 parallel, interleaved",
      floorStorage: ctx.storage,
      better: "higher-is-better",
      // Target: ≥ 0.9 × the engine's own rate, measured beside it.
      maxRatio: 1.11,
      detail: {
        rounds,
        burst,
        spansMs: spans,
        rawSpansMs: rawSpans,
        stages: stageMedians(outcomes),
        queuedAndOverhead,
        // Starts a pool served make no container: none with an empty pool, and none may count.
        fromPool: fromPool(outcomes),
        poolSize,
      },
    });
  } finally {
    await d.stop();
  }
};
