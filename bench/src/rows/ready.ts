import type { BenchContext } from "../context.ts";
import type { BenchRow } from "../report.ts";
import { coldRows, coldStarts, overheadRow } from "./ready/cold.ts";
import { readyEnvironment } from "./ready/environment.ts";
import { poolRows } from "./ready/pool.ts";
import { repoRows } from "./ready/repo.ts";
import { throughputRow } from "./ready/throughput.ts";

/**
 * Time to READY through the real API and worker processes: without a repository (cold, and with
 * the warm pool), with a repository and a setup script (local git server), each next to its raw
 * Docker floor; then start throughput with 1 and 2 workers and the orchestration overhead. The
 * cold run comes first: its floor paces the pool's steady rate, and its starts give the overhead.
 */
export const readyRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const env = await readyEnvironment(ctx);
  try {
    const cold = await coldStarts(ctx, env);
    const rows = await poolRows(ctx, env, cold.floor);
    rows.push(...coldRows(ctx, cold));
    rows.push(...(await repoRows(ctx, env)));
    if (ctx.gate) return rows;
    // No pool: every start of the burst makes its container, as every one of the floor's does.
    for (const workers of [1, 2]) rows.push(await throughputRow(ctx, env, workers, 0));
    rows.push(overheadRow(cold));
    return rows;
  } finally {
    await env.close();
  }
};
