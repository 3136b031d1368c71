/**
 * A/B of two builds of the API on the events search, interleaved request by request so both see
 * the same load (this machine's is rarely quiet): the API built in this tree and the one built in
 * `--base DIR` (another checkout, `node scripts/build.mjs` run in both), beside the raw SQL and the
 * bare Hono page the bench's bound is made of. Prints per page the p50 of each and its ratio to
 * the bound, and each API's CPU time per request (from /proc, so the machine's load weighs less).
 * Usage: node --import tsx bench/src/experiments/search-ab.mts --base /path/to/other/checkout [reps=500] [--full]
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { createDb, type EventPageRequest, eventsSearchRepository } from "@tern/db";
import { appEntry, createRedisPrefix, deleteRedisPrefix, freePort, repoRoot, tenancyLimitsOff } from "@tern/testing";
import pg from "pg";
import { spawnBareHono } from "../bare-hono-process.ts";
import { ensureEventsDataset, FULL_DATASET, QUICK_DATASET } from "../events-db.ts";
import { createKey } from "../services.ts";
import { summarize } from "../stats.ts";

const args = process.argv.slice(2);
const baseDir = args[args.indexOf("--base") + 1];
if (!args.includes("--base") || !baseDir) throw new Error("--base DIR is required");
const reps = Number(args.find((a) => /^\d+$/.test(a)) ?? 500);
const dataset = await ensureEventsDataset(args.includes("--full") ? FULL_DATASET : QUICK_DATASET, () => undefined);
const { key } = await createKey(dataset.url, { userId: dataset.ownerId });

const stat = (pid: number): string[] => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
/** CPU time (user + system) of a process in ms; ticks are 10 ms. */
const cpuMs = (pid: number): number => {
  const f = stat(pid);
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};
/** Its system share alone. */
const sysMs = (pid: number): number => (Number(stat(pid)[12]) * 1000) / 100;

const startApi = async (cwd: string, prefix: string) => {
  const port = await freePort();
  const child = spawn(process.execPath, appEntry("api"), {
    cwd,
    env: {
      ...process.env,
      ...tenancyLimitsOff,
      LOG_LEVEL: "info",
      RATE_LIMIT_PER_MINUTE: "1000000",
      DATABASE_URL: dataset.url,
      REDIS_PREFIX: prefix,
      PORT: String(port),
      HOST: "127.0.0.1",
    },
    // As the bench has it: the API's output read by this process.
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", () => undefined);
  child.stderr.on("data", () => undefined);
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`api in ${cwd} exited`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  const stop = async () => {
    child.kill("SIGTERM");
    await once(child, "exit");
  };
  return { url, pid: child.pid ?? 0, stop };
};

const prefix = createRedisPrefix();
const apis = { base: await startApi(baseDir, prefix), new: await startApi(repoRoot, prefix) };
const raw = new pg.Client({ connectionString: dataset.url, options: "-c TimeZone=UTC" });
await raw.connect();
const handle = createDb(dataset.url, { max: 1 });
const repo = eventsSearchRepository(handle.db);
const conv = dataset.bigConversationId;
const headers = { authorization: `Bearer ${key}` };
const get = async (api: string, query: Record<string, string>) => {
  const res = await fetch(`${api}/api/v1/conversation/${conv}/events/search?${new URLSearchParams(query)}`, {
    headers,
  });
  if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
  return (await res.json()) as { items: { id: string }[]; next_page_id: string | null };
};
try {
  let page = await get(apis.new.url, { limit: "100" });
  for (let i = 1; i < 20 && page.next_page_id; i++)
    page = await get(apis.new.url, { limit: "100", page_id: page.next_page_id });
  const deepCursor = page.next_page_id ?? "";
  const pos = await raw.query<{ ts: string; seq: string }>(
    `select to_char("timestamp" at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ts, seq from events where conversation_id = $1 and id = $2`,
    [conv, page.items.at(-1)?.id],
  );
  const after = { timestamp: pos.rows[0]?.ts as string, seq: Number(pos.rows[0]?.seq) };
  const filter = { conversationId: conv, ownerId: dataset.ownerId };
  const scenarios: { id: string; query: Record<string, string>; request: EventPageRequest }[] = [
    { id: "first", query: { limit: "100" }, request: { filter, order: "asc", limit: 100 } },
    { id: "deep", query: { limit: "100", page_id: deepCursor }, request: { filter, order: "asc", after, limit: 100 } },
    {
      id: "kind",
      query: { limit: "100", kind__eq: "MessageEvent" },
      request: { filter: { ...filter, kind: "MessageEvent" }, order: "asc", limit: 100 },
    },
  ];
  process.stdout.write(`load ${loadavg()[0]?.toFixed(1)}, ${reps} samples a page\n`);
  for (const s of scenarios) {
    const compiled = repo.compilePage(s.request);
    const sqlText = { text: compiled.sql, values: compiled.parameters as unknown[] };
    const bare = await spawnBareHono(JSON.stringify(await get(apis.new.url, s.query)));
    const ms: Record<string, number[]> = { base: [], new: [], raw: [], http: [] };
    const cpu = { base: 0, new: 0, bare: 0, baseSys: 0, newSys: 0, bareSys: 0 };
    const time = async (k: string, fn: () => Promise<unknown>) => {
      const t = performance.now();
      await fn();
      ms[k]?.push(performance.now() - t);
    };
    try {
      for (let i = 0; i < 20; i++) {
        await get(apis.base.url, s.query);
        await get(apis.new.url, s.query);
      }
      const cpu0 = { base: cpuMs(apis.base.pid), new: cpuMs(apis.new.pid), bare: cpuMs(bare.pid) };
      const sys0 = { base: sysMs(apis.base.pid), new: sysMs(apis.new.pid), bare: sysMs(bare.pid) };
      for (let i = 0; i < reps; i++) {
        // Alternate which build goes first, so neither always follows the other's work.
        const order = i % 2 ? (["base", "new"] as const) : (["new", "base"] as const);
        for (const k of order) await time(k, () => get(apis[k].url, s.query));
        await time("raw", () => raw.query(sqlText));
        await time("http", async () => (await fetch(`${bare.url}/x`)).json());
      }
      cpu.base = (cpuMs(apis.base.pid) - cpu0.base) / reps;
      cpu.new = (cpuMs(apis.new.pid) - cpu0.new) / reps;
      cpu.bare = (cpuMs(bare.pid) - cpu0.bare) / reps;
      cpu.baseSys = (sysMs(apis.base.pid) - sys0.base) / reps;
      cpu.newSys = (sysMs(apis.new.pid) - sys0.new) / reps;
      cpu.bareSys = (sysMs(bare.pid) - sys0.bare) / reps;
    } finally {
      await bare.stop();
    }
    const p = (k: string) => summarize(ms[k] ?? []).p50;
    const bound = p("raw") + p("http");
    process.stdout.write(
      `${s.id.padEnd(6)} bound ${bound.toFixed(2)} ms (raw ${p("raw").toFixed(2)} + http ${p("http").toFixed(2)}, bare cpu ${cpu.bare.toFixed(2)} (sys ${cpu.bareSys.toFixed(2)}) ms/req) | ` +
        `base ${p("base").toFixed(2)} ms ${(p("base") / bound).toFixed(2)}× cpu ${cpu.base.toFixed(2)} (sys ${cpu.baseSys.toFixed(2)}) ms/req | ` +
        `new ${p("new").toFixed(2)} ms ${(p("new") / bound).toFixed(2)}× cpu ${cpu.new.toFixed(2)} (sys ${cpu.newSys.toFixed(2)}) ms/req | load ${loadavg()[0]?.toFixed(1)}\n`,
    );
  }
} finally {
  await raw.end();
  await handle.close();
  await apis.base.stop();
  await apis.new.stop();
  await deleteRedisPrefix(prefix);
}
