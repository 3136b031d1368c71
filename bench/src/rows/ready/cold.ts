import type { BenchContext } from "../../context.ts";
import { type BenchRow, row } from "../../report.ts";
import { dockerMs, type StartOutcome } from "../../starts.ts";
import { type LatencySummary, summarize, tailKeys, tailText } from "../../stats.ts";
import type { ReadyEnvironment } from "./environment.ts";
import { coldImage, rawStartOnce } from "./floors.ts";
import { sequentialStarts, stageMedians } from "./outcomes.ts";

export interface ColdRun {
  outcomes: StartOutcome[];
  /** Raw create + start of the image a cold start uses, sampled right before each start. */
  floor: LatencySummary;
  /** The image the floor's containers were made from. */
  image: string;
}

/** Cold: no pool; each start right after a floor sample (create + start, no exec, as the service's). */
export const coldStarts = async (ctx: BenchContext, env: ReadyEnvironment): Promise<ColdRun> => {
  const d = await env.deployment(1, 0);
  let cold: ColdRun;
  try {
    await d.startOne({ title: "warm-up" });
    await new Promise((r) => setTimeout(r, 300));
    ctx.rss.worker.idle.push(...(await d.workerRss()));
    // The warm-up made the empty-workspace image the cold starts use: the floor makes its containers from it.
    const image = await coldImage(ctx);
    const run = await sequentialStarts(
      ctx,
      d,
      env.n,
      () => ({ title: "bench" }),
      0,
      (i) => rawStartOnce(ctx, i, env.network, image),
    );
    cold = { outcomes: run.outcomes, floor: summarize(run.floor), image };
  } finally {
    await d.stop();
  }
  ctx.progress(`raw create+start: p50 ${cold.floor.p50.toFixed(0)} ms, ${tailText(cold.floor)}`);
  const coldS = summarize(cold.outcomes.map((o) => o.clientMs));
  ctx.progress(
    `cold start to READY: p50 ${coldS.p50.toFixed(0)} ms; stages ${JSON.stringify(stageMedians(cold.outcomes))}`,
  );
  return cold;
};

export const coldRows = (ctx: BenchContext, { outcomes: cold, floor, image }: ColdRun): BenchRow[] => {
  const coldS = summarize(cold.map((o) => o.clientMs));
  return (["p50", ...tailKeys(coldS, true)] as const).map((p) =>
    row({
      id: `ready.cold.${p}`,
      label: `time to READY, no pool, ${p}`,
      unit: "ms",
      value: coldS[p],
      floor: floor[p],
      floorLabel: "raw create+start",
      floorStorage: ctx.storage,
      // A single sample (the maximum) carries no target.
      ...(p === "max" ? {} : { maxRatio: 1.15 }),
      detail:
        p === "p50"
          ? {
              client: coldS,
              server: summarize(cold.map((o) => o.serverMs)),
              stages: stageMedians(cold),
              floor,
              floorImage: image === ctx.image ? image : "the empty-workspace image",
            }
          : {},
    }),
  );
};

/** Orchestration overhead of one start (API + queue + database), Docker stages subtracted, from the cold run. */
export const overheadRow = ({ outcomes: cold }: ColdRun): BenchRow => {
  const overhead = summarize(cold.map((o) => o.clientMs - dockerMs(o)));
  return row({
    id: "overhead.per_start.p50",
    label: "orchestration overhead per start, p50",
    unit: "ms",
    value: overhead.p50,
    floor: null,
    absolute: 10,
    detail: { overhead, serverSide: summarize(cold.map((o) => o.serverMs - dockerMs(o))) },
  });
};
