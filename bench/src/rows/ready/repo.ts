import { SandboxLabel } from "@tern/sandbox";
import type { BenchContext } from "../../context.ts";
import { type BenchRow, row } from "../../report.ts";
import type { StartOutcome } from "../../starts.ts";
import { type LatencySummary, summarize, tailKeys } from "../../stats.ts";
import type { ReadyEnvironment } from "./environment.ts";
import { coldImage, rawRepoStartOnce, rawStartOnce } from "./floors.ts";
import { sequentialStarts, stageMedians } from "./outcomes.ts";

interface RepoRun {
  outcomes: StartOutcome[];
  floor: LatencySummary;
}

const summaryRows = (
  ctx: BenchContext,
  run: RepoRun,
  opts: { id: string; label: string; floorLabel: string; maxRatio: number; note?: string },
): BenchRow[] => {
  const s = summarize(run.outcomes.map((o) => o.clientMs));
  return (["p50", ...tailKeys(s, true)] as const).map((p) =>
    row({
      id: `${opts.id}.${p}`,
      label: `${opts.label}, ${p}`,
      unit: "ms",
      value: s[p],
      floor: run.floor[p],
      floorLabel: opts.floorLabel,
      floorStorage: ctx.storage,
      // A single sample (the maximum) carries no target.
      ...(p === "max" ? {} : { maxRatio: opts.maxRatio }),
      detail:
        p === "p50"
          ? {
              client: s,
              server: summarize(run.outcomes.map((o) => o.serverMs)),
              stages: stageMedians(run.outcomes),
              floor: run.floor,
              ...(opts.note ? { note: opts.note } : {}),
            }
          : {},
    }),
  );
};

/**
 * With a repository and a setup script, no pool (the floors have none either): the first start
 * (`fresh`: clone and setup script; the snapshot's commit runs on after READY), then the repeat start of
 * the same user, repository and commit, which begins from that snapshot.
 */
export const repoRows = async (ctx: BenchContext, env: ReadyEnvironment): Promise<BenchRow[]> => {
  const cloneUrl = `${env.git.url}/bench/app.git`;
  const d = await env.deployment(1, 0);
  const body = { title: "bench", selected_repository: "bench/app" };
  let first: RepoRun;
  let repeat: RepoRun;
  try {
    // Also makes the snapshot the repeat starts begin from.
    await d.startOne({ title: "warm-up", selected_repository: "bench/app" });
    // The image a start without a snapshot makes its sandbox from (the empty-workspace one, made by now).
    const image = await coldImage(ctx);
    const run = await sequentialStarts(
      ctx,
      d,
      env.n,
      () => ({ ...body, fresh: true }),
      0,
      (i) => rawRepoStartOnce(ctx, i, env.network, cloneUrl, image),
    );
    first = { outcomes: run.outcomes, floor: summarize(run.floor) };
    const again = await sequentialStarts(
      ctx,
      d,
      env.n,
      () => body,
      0,
      (i) => rawStartOnce(ctx, i, env.network, image),
    );
    repeat = { outcomes: again.outcomes, floor: summarize(again.floor) };
  } finally {
    await d.stop();
    // The deployment's snapshot images go with it.
    const images = (await ctx.sandboxes.listImages?.({ [SandboxLabel.Namespace]: d.prefix })) ?? [];
    for (const img of images) await ctx.sandboxes.removeImage?.(img.image);
  }
  ctx.progress(
    `raw create beside a host clone, then placement+setup, hook, skills: p50 ${first.floor.p50.toFixed(0)} ms`,
  );
  ctx.progress(
    `repo start to READY: p50 ${summarize(first.outcomes.map((o) => o.clientMs)).p50.toFixed(0)} ms; stages ${JSON.stringify(stageMedians(first.outcomes))}`,
  );
  ctx.progress(
    `repeat repo start (snapshot) to READY: p50 ${summarize(repeat.outcomes.map((o) => o.clientMs)).p50.toFixed(0)} ms (floor ${repeat.floor.p50.toFixed(0)}); stages ${JSON.stringify(stageMedians(repeat.outcomes))}`,
  );
  return [
    ...summaryRows(ctx, first, {
      id: "ready.repo",
      label: "time to READY, repo + setup.sh + hook + skills",
      floorLabel: "raw create+start beside a host clone, then placement+setup, hook, skills",
      maxRatio: 1.1,
      note: "first start (fresh: true): clone and setup.sh; the snapshot's commit runs after READY (the agent's calls into the sandbox wait for it), and each sample waits for it before the next",
    }),
    ...summaryRows(ctx, repeat, {
      id: "ready.repo_snapshot",
      label: "time to READY, repeat repo + setup.sh + hook + skills (snapshot)",
      floorLabel: "raw create+start (the cold floor)",
      maxRatio: 1.15,
      note: "the same user, repository and commit again: from the snapshot image, no clone, no setup.sh, no hook or skill exec",
    }),
  ];
};
