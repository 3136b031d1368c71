import { randomUUID } from "node:crypto";
import { createRedisPrefix, createTestDatabase, deleteRedisPrefix } from "@tern/testing";
import { spawnBareHono } from "../bare-hono-process.ts";
import type { BenchContext } from "../context.ts";
import { loadTest, rssMiB, sampleRss } from "../load.ts";
import { type BenchRow, row } from "../report.ts";
import { createKey, spawnApi } from "../services.ts";

const IDS = 10;

/**
 * Authenticated `GET /api/v1/app-conversations?ids=…` (10 ids, each the caller's) driven by
 * autocannon, against a bare Hono handler on @hono/node-server serving the same body, in the same
 * run. Also samples the API's RSS idle and under this load.
 */
export const conversationsGetRows = async (
  ctx: BenchContext,
  startApi: (
    databaseUrl: string,
    redisPrefix: string,
    env?: Record<string, string>,
  ) => ReturnType<typeof spawnApi> = spawnApi,
): Promise<BenchRow[]> => {
  const db = await createTestDatabase();
  const prefix = createRedisPrefix();
  // The rate limiter on (a limit no run reaches), as a deployment has it: its cost is in the row.
  const api = await startApi(db.url, prefix, { RATE_LIMIT_PER_MINUTE: "1000000" });
  try {
    const { key, userId } = await createKey(db.url);
    const ids = Array.from({ length: IDS }, () => randomUUID());
    for (const id of ids) {
      await db.pool.query(
        `insert into conversations (id, user_id, title, workspace_dir) values ($1, $2, 'bench', '/workspace')`,
        [id, userId],
      );
    }
    const path = `/api/v1/app-conversations?${ids.map((id) => `ids=${id}`).join("&")}`;
    const headers = { authorization: `Bearer ${key}` };
    const first = await fetch(`${api.url}${path}`, { headers });
    const body = await first.text();
    if (first.status !== 200 || (JSON.parse(body) as unknown[]).some((x) => x === null)) {
      throw new Error(`batch GET answered ${first.status}: ${body.slice(0, 300)}`);
    }

    await new Promise((r) => setTimeout(r, 500));
    ctx.rss.api.idle.push(await rssMiB(api.pid));

    // Interleaved in rounds, as the search row is: an API run, then a bare Hono run of the same
    // length, so a drift in the machine's speed falls on both.
    const rounds = ctx.gate ? 3 : ctx.quick ? 2 : 5;
    const seconds = ctx.quick ? 1 : 2;
    const connections = 32;
    const bare = await spawnBareHono(body);
    const apiRuns: Awaited<ReturnType<typeof loadTest>>[] = [];
    const bareRuns: Awaited<ReturnType<typeof loadTest>>[] = [];
    try {
      // Warm-up (JIT, pg pool) for both, then the measured rounds.
      await loadTest({ url: `${api.url}${path}`, headers, seconds: ctx.quick ? 1 : 3, connections });
      await loadTest({ url: `${bare.url}${path}`, seconds: 1, connections });
      const rss = sampleRss(api.pid);
      for (let round = 0; round < rounds; round++) {
        const a = await loadTest({ url: `${api.url}${path}`, headers, seconds, connections });
        if (a.non2xx > 0 || a.errors > 0) throw new Error(`API load: ${a.non2xx} non-2xx, ${a.errors} errors`);
        apiRuns.push(a);
        bareRuns.push(await loadTest({ url: `${bare.url}${path}`, seconds, connections }));
      }
      ctx.rss.api.load.push(...rss.stop());
    } finally {
      await bare.stop();
    }
    const total = (runs: typeof apiRuns) => runs.reduce((n, r) => n + r.total, 0);
    const a = { requestsPerSec: total(apiRuns) / (rounds * seconds), rounds: apiRuns };
    const b = { requestsPerSec: total(bareRuns) / (rounds * seconds), rounds: bareRuns };
    ctx.progress(
      `batch GET: API ${a.requestsPerSec.toFixed(0)} req/s (p99 ${Math.max(...apiRuns.map((r) => r.p99Ms))} ms), bare Hono ${b.requestsPerSec.toFixed(0)} req/s, ${rounds} rounds of ${seconds} s each`,
    );
    return [
      row({
        id: "get.conversations.rps",
        label: `authenticated GET app-conversations (${IDS} ids, rate limiter on)`,
        unit: "req/s",
        value: a.requestsPerSec,
        floor: b.requestsPerSec,
        floorLabel: "bare Hono, interleaved in rounds",
        better: "higher-is-better",
        // Target: ≥ 0.25 × the bare Hono serving the same JSON in the same run.
        maxRatio: 4,
        detail: { api: a, bare: b, connections, seconds, rounds, ids: IDS },
      }),
    ];
  } finally {
    await api.stop();
    await db.drop();
    await deleteRedisPrefix(prefix);
  }
};
