import { createDb, type EventPageRequest, eventsSearchRepository } from "@tern/db";
import { createRedisPrefix, deleteRedisPrefix } from "@tern/testing";
import pg from "pg";
import { spawnBareHono } from "../bare-hono-process.ts";
import type { BenchContext } from "../context.ts";
import { eventTimestampMs } from "../event-data.ts";
import { ensureEventsDataset, FULL_DATASET, QUICK_DATASET } from "../events-db.ts";
import { sampleRss } from "../load.ts";
import { type BenchRow, row } from "../report.ts";
import { createKey, spawnApi } from "../services.ts";
import { summarize, tailKeys, tailText } from "../stats.ts";

interface Scenario {
  id: string;
  label: string;
  query: Record<string, string>;
  request: EventPageRequest;
}

interface SearchPage {
  items: { id: string; timestamp: string }[];
  next_page_id: string | null;
}

/**
 * Events search at 10M events (1M in the conversation searched): the API endpoint against the
 * very SQL its repository issues (compilePage), run directly with pg from this process.
 */
export const eventsSearchRows = async (
  ctx: BenchContext,
  /** An experiment's own sample count per page (experiments/search-ratio.mts); the bench's otherwise. */
  opts: { reps?: number } = {},
): Promise<BenchRow[]> => {
  const size = ctx.quick ? QUICK_DATASET : FULL_DATASET;
  const dataset = await ensureEventsDataset(size, ctx.progress);
  ctx.progress(
    `events dataset ${dataset.name}: ${dataset.total.toLocaleString()} events${dataset.built ? `, built in ${((dataset.loadMs ?? 0) / 1000).toFixed(0)} s` : ", reused"}`,
  );
  const { key } = await createKey(dataset.url, { userId: dataset.ownerId });
  const prefix = createRedisPrefix();
  // The rate limiter on (a limit no run reaches), as a deployment has it: its cost is in the page's time.
  const api = await spawnApi(dataset.url, prefix, { RATE_LIMIT_PER_MINUTE: "1000000" });
  const raw = new pg.Client({ connectionString: dataset.url, options: "-c TimeZone=UTC" });
  await raw.connect();
  const handle = createDb(dataset.url, { max: 1 });
  const repo = eventsSearchRepository(handle.db);
  const conv = dataset.bigConversationId;
  const base = `${api.url}/api/v1/conversation/${conv}/events/search`;
  const headers = { authorization: `Bearer ${key}` };
  const get = async (query: Record<string, string>): Promise<SearchPage> => {
    const res = await fetch(`${base}?${new URLSearchParams(query)}`, { headers });
    if (res.status !== 200) throw new Error(`events search answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as SearchPage;
  };
  try {
    // A deep page: follow the cursors, as a client would, `depth` pages in.
    const depth = ctx.quick ? 20 : 2_000;
    let page = await get({ limit: "100" });
    for (let i = 1; i < depth; i++) {
      if (!page.next_page_id) throw new Error(`only ${i} pages`);
      page = await get({ limit: "100", page_id: page.next_page_id });
    }
    const deepCursor = page.next_page_id;
    if (!deepCursor) throw new Error("no deep cursor");
    const lastItem = page.items.at(-1);
    // The position the cursor stands for, from the database (the cursor is opaque).
    const pos = await raw.query<{ ts: string; seq: string }>(
      `select to_char("timestamp" at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ts, seq from events where conversation_id = $1 and id = $2`,
      [conv, lastItem?.id],
    );
    const after = { timestamp: pos.rows[0]?.ts as string, seq: Number(pos.rows[0]?.seq) };

    const mid = Math.floor(dataset.bigSize / 2);
    const gte = new Date(eventTimestampMs(mid)).toISOString();
    const lt = new Date(eventTimestampMs(mid) + 3_600_000).toISOString();
    // As the API asks it: the owner check is part of the statement.
    const filter = { conversationId: conv, ownerId: dataset.ownerId };
    const scenarios: Scenario[] = [
      { id: "first", label: "first page", query: { limit: "100" }, request: { filter, order: "asc", limit: 100 } },
      {
        id: "deep",
        label: `deep page (${(depth * 100).toLocaleString()} in)`,
        query: { limit: "100", page_id: deepCursor },
        request: { filter, order: "asc", after, limit: 100 },
      },
      {
        id: "kind",
        label: "kind filter",
        query: { limit: "100", kind__eq: "MessageEvent" },
        request: { filter: { ...filter, kind: "MessageEvent" }, order: "asc", limit: 100 },
      },
      {
        id: "window",
        label: "time window",
        query: { limit: "100", timestamp__gte: gte, timestamp__lt: lt },
        request: { filter: { ...filter, timestampGte: gte, timestampLt: lt }, order: "asc", limit: 100 },
      },
    ];
    const reps = opts.reps ?? (ctx.quick ? 30 : 1_000);
    const rows: BenchRow[] = [];
    const rss = sampleRss(api.pid);
    for (const s of scenarios) {
      const compiled = repo.compilePage(s.request);
      const sqlText = { text: compiled.sql, values: compiled.parameters as unknown[] };
      // Both sides must return the same page.
      const check = await get(s.query);
      const direct = await raw.query(sqlText);
      if (check.items[0]?.id !== direct.rows[0]?.id || check.items.length !== Math.min(100, direct.rows.length)) {
        throw new Error(`${s.id}: the API and the raw query disagree`);
      }
      // What bounds the ratio: the same page's JSON from a bare Hono process (HTTP and JSON, no
      // auth, no database), measured interleaved with the other two.
      const bare = await spawnBareHono(JSON.stringify(check));
      const bareGet = async () => (await fetch(`${bare.url}/search?${new URLSearchParams(s.query)}`)).json();
      const apiMs: number[] = [];
      const rawMs: number[] = [];
      const httpMs: number[] = [];
      try {
        // Warm all three, then interleave so each side sees the same conditions.
        for (let i = 0; i < 10; i++) {
          await get(s.query);
          await raw.query(sqlText);
          await bareGet();
        }
        for (let i = 0; i < reps; i++) {
          let t = performance.now();
          await get(s.query);
          apiMs.push(performance.now() - t);
          t = performance.now();
          await raw.query(sqlText);
          rawMs.push(performance.now() - t);
          t = performance.now();
          await bareGet();
          httpMs.push(performance.now() - t);
        }
      } finally {
        await bare.stop();
      }
      const a = summarize(apiMs);
      const r = summarize(rawMs);
      const http = summarize(httpMs);
      ctx.progress(
        `events search ${s.id}: API p50 ${a.p50.toFixed(2)} ms, ${tailText(a)}; raw p50 ${r.p50.toFixed(2)} ms, ${tailText(r)}; bare HTTP p50 ${http.p50.toFixed(2)} ms`,
      );
      const detail = {
        api: a,
        raw: r,
        // The bound: no server answers this page faster than raw SQL plus bare HTTP.
        bareHttp: http,
        rawPlusHttpP50: r.p50 + http.p50,
        events: dataset.total,
        inConversation: dataset.bigSize,
        reps,
      };
      rows.push(
        // The p50 against the bound no server can beat (raw SQL + a bare Hono page).
        row({
          id: `search.${s.id}.bound`,
          label: `events search ${s.label} p50 vs raw SQL + bare HTTP`,
          unit: "ms",
          value: a.p50,
          floor: r.p50 + http.p50,
          floorLabel: "raw SQL + bare HTTP",
          maxRatio: 1.25,
          detail: { api: a, raw: r, bareHttp: http },
        }),
        ...(["p50", ...tailKeys(a, false)] as const).map((p) =>
          row({
            id: `search.${s.id}.${p}`,
            label: `events search ${s.label} ${p}`,
            unit: "ms",
            value: a[p],
            floor: r[p],
            floorLabel: "raw SQL",
            ...(p === "p99" ? { absolute: 10 } : {}),
            // Against raw SQL alone, the older target; a single sample (the maximum) carries none.
            ...(p === "max" ? {} : { maxRatio: 1.5 }),
            detail,
          }),
        ),
      );
    }
    ctx.rss.api.load.push(...rss.stop());
    return rows;
  } finally {
    await raw.end();
    await handle.close();
    await api.stop();
    await deleteRedisPrefix(prefix);
  }
};
