/**
 * Profiling aid (not part of `pnpm bench`): the events search load (first page, a deep cursor, a
 * kind filter, a time window, interleaved) against the compiled API started with `--cpu-prof`, on
 * the quick dataset; prints the API's p50 per page, then the hottest functions by self time and
 * the heaviest by total time (frames of one function counted once per sample).
 * Usage: node --import tsx bench/src/experiments/profile-search.mts [requests per page] [--no-prof]
 * (run `node scripts/build.mjs` first: the API runs from apps/api/dist, as the bench runs it).
 */

import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { appEntry, createRedisPrefix, deleteRedisPrefix, freePort, tenancyLimitsOff } from "@tern/testing";
import { ensureEventsDataset, QUICK_DATASET } from "../events-db.ts";
import { createKey } from "../services.ts";
import { summarize } from "../stats.ts";
import { spawnPolledService } from "./polled-service.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const reps = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 2_000);
const profiled = !process.argv.includes("--no-prof");
const dir = "/tmp/tern-api-search-prof";
await rm(dir, { recursive: true, force: true });
const dataset = await ensureEventsDataset(QUICK_DATASET, (m) => process.stderr.write(`${m}\n`));
const { key } = await createKey(dataset.url, { userId: dataset.ownerId });
const prefix = createRedisPrefix();
const port = await freePort();
const api = await spawnPolledService(
  port,
  [...(profiled ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : []), ...appEntry("api")],
  {
    ...process.env,
    ...tenancyLimitsOff,
    LOG_LEVEL: "info",
    RATE_LIMIT_PER_MINUTE: "1000000",
    DATABASE_URL: dataset.url,
    REDIS_PREFIX: prefix,
    PORT: String(port),
    HOST: "127.0.0.1",
    ...(process.env.SEARCH_PROFILE_ENV ? JSON.parse(process.env.SEARCH_PROFILE_ENV) : {}),
  },
  async (url) => (await fetch(`${url}/health`)).ok,
);
const base = `${api.url}/api/v1/conversation/${dataset.bigConversationId}/events/search`;
const headers = { authorization: `Bearer ${key}` };
const get = async (query: Record<string, string>) => {
  const res = await fetch(`${base}?${new URLSearchParams(query)}`, { headers });
  if (res.status !== 200) throw new Error(`events search answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as { next_page_id: string | null };
};
try {
  let page = await get({ limit: "100" });
  for (let i = 1; i < 20 && page.next_page_id; i++) page = await get({ limit: "100", page_id: page.next_page_id });
  const scenarios: Record<string, Record<string, string>> = {
    first: { limit: "100" },
    deep: { limit: "100", page_id: page.next_page_id ?? "" },
    kind: { limit: "100", kind__eq: "MessageEvent" },
    window: { limit: "100", timestamp__gte: "2026-01-01T00:00:00Z", timestamp__lt: "2030-01-01T00:00:00Z" },
  };
  const ms: Record<string, number[]> = { first: [], deep: [], kind: [], window: [] };
  for (let i = 0; i < reps; i++) {
    for (const [id, q] of Object.entries(scenarios)) {
      const t = performance.now();
      await get(q);
      if (i >= 50) ms[id]?.push(performance.now() - t);
    }
  }
  for (const [id, xs] of Object.entries(ms)) {
    const s = summarize(xs);
    process.stdout.write(`${id}: p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms\n`);
  }
} finally {
  await api.stop();
  await deleteRedisPrefix(prefix);
}
if (profiled) {
  for (const f of await readdir(dir)) {
    const p = JSON.parse(await readFile(join(dir, f), "utf8")) as Profile;
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const nameOf = (n: ProfileNode) =>
      `${n.callFrame.functionName || "(anon)"} ${n.callFrame.url.replace(/.*node_modules\//, "").replace(/.*\/work\/wt\/[^/]+\//, "")}:${n.callFrame.lineNumber}`;
    const self = new Map<string, number>();
    const total = new Map<string, number>();
    let all = 0;
    p.samples.forEach((id, i) => {
      const dt = p.timeDeltas[i] ?? 0;
      all += dt;
      const n = byId.get(id);
      if (!n) return;
      self.set(nameOf(n), (self.get(nameOf(n)) ?? 0) + dt);
      const seen = new Set<string>();
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const node = byId.get(at);
        if (!node) break;
        const k = nameOf(node);
        if (seen.has(k)) continue;
        seen.add(k);
        total.set(k, (total.get(k) ?? 0) + dt);
      }
    });
    const print = (title: string, m: Map<string, number>, n: number) => {
      process.stdout.write(`\n${f} ${title} (${(all / 1e6).toFixed(1)} s sampled)\n`);
      for (const [k, v] of [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n)) {
        process.stdout.write(`${((v / all) * 100).toFixed(1).padStart(5)}%  ${k}\n`);
      }
    };
    print("self", self, 40);
    // Self time by package (node_modules package, our package, node's own), the hot path's areas.
    const byArea = new Map<string, number>();
    for (const [k, v] of self) {
      const url = k.split(" ").slice(1).join(" ");
      const area =
        /^(@[^/]+\/[^/]+|[^/@][^/]*)\/dist/.exec(url)?.[1] ??
        /^(packages\/[^/]+|apps\/[^/]+)/.exec(url)?.[1] ??
        (url.startsWith("node:") ? "node" : (k.split(" ")[0] ?? "?"));
      byArea.set(area, (byArea.get(area) ?? 0) + v);
    }
    print("self by area", byArea, 30);
    print("total", total, Number(process.env.SEARCH_PROFILE_TOTAL ?? 80));
  }
}
