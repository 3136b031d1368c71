/**
 * The repeat repository start against the cold floor (bench README, `ready.repo_snapshot`), alone:
 * a first start makes the snapshot, then `n` starts of the same user, repository and commit, each
 * right after a floor sample, with each stage's database and engine time.
 *
 *   node --import tsx bench/src/experiments/repo-repeat.mts [n]
 */
import { SandboxLabel } from "@tern/sandbox";
import { createContext } from "../context.ts";
import { removeBenchContainers } from "../raw-docker.ts";
import { readyEnvironment } from "../rows/ready/environment.ts";
import { coldImage, rawStartOnce } from "../rows/ready/floors.ts";
import { sequentialStarts, stageMedians } from "../rows/ready/outcomes.ts";
import { buildServices } from "../services.ts";
import { summarize } from "../stats.ts";

const n = Number(process.argv[2] ?? 20);
buildServices();
const ctx = createContext(false);
const env = await readyEnvironment(ctx);
const d = await env.deployment(1, 0);
try {
  // Makes the snapshot the repeat starts begin from.
  await d.startOne({ title: "warm-up", selected_repository: "bench/app" });
  const image = await coldImage(ctx);
  const run = await sequentialStarts(
    ctx,
    d,
    n,
    () => ({ title: "bench", selected_repository: "bench/app" }),
    Number(process.env.PAUSE_MS ?? 0),
    (i) => rawStartOnce(ctx, i, env.network, image),
  );
  const client = summarize(run.outcomes.map((o) => o.clientMs));
  const server = summarize(run.outcomes.map((o) => o.serverMs));
  const floor = summarize(run.floor);
  const f = (x: number) => x.toFixed(1);
  process.stdout.write(
    `client p50 ${f(client.p50)} (p95 ${f(client.p95)}); server p50 ${f(server.p50)}; floor p50 ${f(floor.p50)} (p95 ${f(floor.p95)}); ratio p50 ${(client.p50 / floor.p50).toFixed(3)}, p95 ${(client.p95 / floor.p95).toFixed(3)}\n`,
  );
  process.stdout.write(`${JSON.stringify(stageMedians(run.outcomes))}\n`);
} finally {
  await d.stop();
  const images = (await ctx.sandboxes.listImages?.({ [SandboxLabel.Namespace]: d.prefix })) ?? [];
  for (const img of images) await ctx.sandboxes.removeImage?.(img.image);
  await env.close();
  await removeBenchContainers(ctx.sandboxes, ctx.runId);
}
