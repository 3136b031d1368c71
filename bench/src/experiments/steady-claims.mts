/**
 * The `ready.pool.refilling` row alone: a self-sizing pool (as the pool rows') served a steady
 * rate of starts, open loop; the claims answered READY are summarized (client time), with the
 * count of starts that went to the queue. A few minutes per try instead of the ready section's 8.
 *
 *   node --import tsx bench/src/experiments/steady-claims.mts [perSec] [starts]
 */
import { createContext } from "../context.ts";
import { readyEnvironment } from "../rows/ready/environment.ts";
import { removeAll } from "../rows/ready/outcomes.ts";
import { buildServices } from "../services.ts";
import { summarize } from "../stats.ts";

const perSec = Number(process.argv[2] ?? 3.5);
const n = Number(process.argv[3] ?? 130);
buildServices();
const ctx = createContext(false);
const env = await readyEnvironment(ctx);
const d = await env.deployment(1, 2, { SANDBOX_POOL_MAX: "12", ...JSON.parse(process.env.EXP_ENV ?? "{}") });
try {
  await d.waitWarm(ctx.sandboxes, 2);
  const all = await d.paced(n, 1000 / perSec, (i) => ({ title: `steady ${i}` }));
  await removeAll(ctx, d, all);
  const counted = all.slice(Math.ceil(perSec * 10));
  const claimed = counted.filter((o) => o.answeredReady);
  const s = summarize(claimed.map((o) => o.clientMs));
  const f = (x: number) => x.toFixed(1);
  process.stdout.write(
    `claimed ${claimed.length}/${counted.length}: p50 ${f(s.p50)} p95 ${f(s.p95)} p99 ${f(s.p99)} max ${f(s.max)}\n`,
  );
  const sorted = claimed.map((o) => o.clientMs).sort((a, b) => b - a);
  process.stdout.write(`slowest: ${sorted.slice(0, 8).map(f).join(" ")}\n`);
  if (process.env.ACCESS_LOG_SLOW_MS) {
    // The API's own line for each slow request (ACCESS_LOG_SLOW_MS in this process's environment).
    const slow = d.api
      .output()
      .split("\n")
      .filter((l) => l.includes('"msg":"request"'));
    process.stdout.write(`${slow.map((l) => l.slice(0, 400)).join("\n")}\n`);
  }
} finally {
  await d.stop();
  await env.close();
}
