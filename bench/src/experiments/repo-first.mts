/**
 * The repository first start against its floor (bench README, "Repository start"), alone: the
 * `ready.repo` row's samples without the rest of the ready section, with each stage's database and
 * engine time, so one change to the path can be measured in a few minutes.
 *
 *   node --import tsx bench/src/experiments/repo-first.mts [n]
 */
import { createContext } from "../context.ts";
import { removeBenchContainers } from "../raw-docker.ts";
import { readyEnvironment } from "../rows/ready/environment.ts";
import { coldImage, rawRepoStartOnce } from "../rows/ready/floors.ts";
import { sequentialStarts, stageMedians } from "../rows/ready/outcomes.ts";
import { buildServices } from "../services.ts";
import { summarize } from "../stats.ts";

const n = Number(process.argv[2] ?? 20);
buildServices();
const ctx = createContext(false);
const env = await readyEnvironment(ctx);
const d = await env.deployment(1, 0);
try {
  const cloneUrl = `${env.git.url}/bench/app.git`;
  await d.startOne({ title: "warm-up", selected_repository: "bench/app" });
  const image = await coldImage(ctx);
  const run = await sequentialStarts(
    ctx,
    d,
    n,
    () => ({ title: "bench", selected_repository: "bench/app", fresh: true }),
    Number(process.env.PAUSE_MS ?? 0),
    (i) => rawRepoStartOnce(ctx, i, env.network, cloneUrl, image),
  );
  const client = summarize(run.outcomes.map((o) => o.clientMs));
  const server = summarize(run.outcomes.map((o) => o.serverMs));
  const floor = summarize(run.floor);
  const f = (x: number) => x.toFixed(1);
  process.stdout.write(
    `client p50 ${f(client.p50)} (p95 ${f(client.p95)}); server p50 ${f(server.p50)}; floor p50 ${f(floor.p50)} (p95 ${f(floor.p95)}); ratio ${(client.p50 / floor.p50).toFixed(3)}\n`,
  );
  process.stdout.write(`${JSON.stringify(stageMedians(run.outcomes))}\n`);
} finally {
  await d.stop();
  await env.close();
  await removeBenchContainers(ctx.sandboxes, ctx.runId);
}
