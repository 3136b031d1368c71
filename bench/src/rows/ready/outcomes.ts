import type { BenchContext } from "../../context.ts";
import type { Deployment, StartOutcome } from "../../starts.ts";
import { summarize } from "../../stats.ts";

/**
 * `n` starts one after another; with `floorOnce`, a floor sample right before each, so the two
 * see the same machine even when its load drifts during the run.
 */
export const sequentialStarts = async (
  ctx: BenchContext,
  d: Deployment,
  n: number,
  body: () => { title: string; selected_repository?: string },
  pauseMs: number,
  floorOnce?: (i: number) => Promise<number>,
): Promise<{ outcomes: StartOutcome[]; floor: number[] }> => {
  const outcomes: StartOutcome[] = [];
  const floor: number[] = [];
  for (let i = 0; i < n; i++) {
    if (floorOnce) floor.push(await floorOnce(i));
    const o = await d.startOne(body());
    outcomes.push(o);
    await d.removeSandbox(ctx.sandboxes, o.sandboxName);
    if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
  }
  return { outcomes, floor };
};

/** Whether a start was served by a warm pool sandbox (the pool's name prefix). */
export const isFromPool = (o: StartOutcome): boolean => o.sandboxName?.startsWith("tern-pool-") ?? false;

export const fromPool = (outcomes: StartOutcome[]): number => outcomes.filter(isFromPool).length;

/** Share of starts the warm pool served, in percent. */
export const hitRate = (outcomes: StartOutcome[]): number => (100 * fromPool(outcomes)) / outcomes.length;

export const removeAll = (ctx: BenchContext, d: Deployment, outcomes: StartOutcome[]) =>
  Promise.all(outcomes.map((o) => d.removeSandbox(ctx.sandboxes, o.sandboxName)));

export const stageMedians = (outcomes: StartOutcome[]): Record<string, number> => {
  const stages = new Set(outcomes.flatMap((o) => Object.keys(o.stageDurations)));
  return Object.fromEntries([...stages].map((s) => [s, summarize(outcomes.map((o) => o.stageDurations[s] ?? 0)).p50]));
};
