import type { BenchContext } from "../../context.ts";
import { type BenchRow, row } from "../../report.ts";
import type { StartOutcome } from "../../starts.ts";
import { type LatencySummary, summarize } from "../../stats.ts";
import type { ReadyEnvironment } from "./environment.ts";
import { rawRepoStartOnce } from "./floors.ts";
import { sequentialStarts, stageMedians } from "./outcomes.ts";

/** With a repository and a setup script, no pool (the floor has none either). */
export const repoRows = async (ctx: BenchContext, env: ReadyEnvironment): Promise<BenchRow[]> => {
  const cloneUrl = `${env.git.url}/bench/app.git`;
  const d = await env.deployment(1, 0);
  let repo: StartOutcome[];
  let repoFloor: LatencySummary;
  try {
    await d.startOne({ title: "warm-up", selected_repository: "bench/app" });
    const run = await sequentialStarts(
      ctx,
      d,
      env.n,
      () => ({ title: "bench", selected_repository: "bench/app" }),
      0,
      (i) => rawRepoStartOnce(ctx, i, env.network, cloneUrl),
    );
    repo = run.outcomes;
    repoFloor = summarize(run.floor);
  } finally {
    await d.stop();
  }
  ctx.progress(`raw container+clone+setup: p50 ${repoFloor.p50.toFixed(0)} ms`);
  const repoS = summarize(repo.map((o) => o.clientMs));
  ctx.progress(`repo start to READY: p50 ${repoS.p50.toFixed(0)} ms; stages ${JSON.stringify(stageMedians(repo))}`);
  return (["p50", "p95", "p99"] as const).map((p) =>
    row({
      id: `ready.repo.${p}`,
      label: `time to READY, repo + setup.sh, ${p}`,
      unit: "ms",
      value: repoS[p],
      floor: repoFloor[p],
      floorLabel: "raw container+clone+setup",
      floorStorage: ctx.storage,
      maxRatio: 1.1,
      detail:
        p === "p50"
          ? {
              client: repoS,
              server: summarize(repo.map((o) => o.serverMs)),
              stages: stageMedians(repo),
              floor: repoFloor,
            }
          : {},
    }),
  );
};
