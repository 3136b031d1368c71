import http from "node:http";
import { toHexId } from "@tern/core";
import { eventsRepository } from "@tern/db";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  sampleEvent,
  waitFor,
} from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { type BenchRow, row } from "../report.ts";
import { createKey, spawnApi } from "../services.ts";
import { summarize } from "../stats.ts";

const STREAMS = 200;

/** One SSE client (node:http, light) that notes when each event id first shows up in its body. */
const openStream = (url: string, key: string, seen: Map<string, number>[], index: number) =>
  new Promise<() => void>((resolve, reject) => {
    const arrivals = new Map<string, number>();
    seen[index] = arrivals;
    const req = http.get(url, { headers: { authorization: `Bearer ${key}` }, agent: false }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      res.setEncoding("utf8");
      let tail = "";
      res.on("data", (chunk: string) => {
        const now = performance.now();
        const text = tail + chunk;
        for (const m of text.matchAll(/"id":"([0-9a-f-]{36})"/g)) {
          if (!arrivals.has(m[1] as string)) arrivals.set(m[1] as string, now);
        }
        tail = text.slice(-80);
      });
      res.on("error", () => undefined);
      resolve(() => req.destroy());
    });
    req.on("error", () => undefined);
  });

/**
 * Live streams: 200 SSE clients of one conversation on one API process (the real process, spawned
 * as in production); one event appended at a time through the events repository (the agent's
 * path), and the time from the append's call to each client reading the event (the commit, the
 * NOTIFY, the catch-up read, the write, the client's read). p50 and p99 over every (event, client).
 */
export const streamRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const db = await createTestDatabase();
  const prefix = createRedisPrefix();
  const api = await spawnApi(db.url, prefix);
  const closers: (() => void)[] = [];
  try {
    const { key, userId } = await createKey(db.url);
    const { conversationId } = await createConversationFixture(db.db, { userId });
    const url = `${api.url}/api/v1/conversation/${toHexId(conversationId)}/events/stream`;
    const seen: Map<string, number>[] = [];
    for (let i = 0; i < STREAMS; i += 20) {
      closers.push(...(await Promise.all(Array.from({ length: 20 }, (_, j) => openStream(url, key, seen, i + j)))));
    }
    const appends = ctx.quick ? 10 : 100;
    const warmUp = 5;
    const samples: number[] = [];
    for (let n = 0; n < warmUp + appends; n++) {
      const started = performance.now();
      const [event] = await eventsRepository(db.db).append(conversationId, [sampleEvent("MessageEvent", n)]);
      const id = event?.id as string;
      await waitFor(() => seen.every((s) => s.has(id)), {
        what: `event ${n} on all ${STREAMS} streams`,
        intervalMs: 5,
      });
      if (n >= warmUp) for (const s of seen) samples.push((s.get(id) as number) - started);
    }
    const summary = summarize(samples);
    ctx.progress(
      `stream: ${STREAMS} streams, ${appends} appends: p50 ${summary.p50.toFixed(1)} ms, p99 ${summary.p99.toFixed(1)} ms`,
    );
    const detail = { streams: STREAMS, appends, ...summary };
    return [
      row({
        id: "stream.delivery.p50",
        label: `append → SSE delivery p50 (${STREAMS} streams)`,
        unit: "ms",
        value: summary.p50,
        detail,
      }),
      row({
        id: "stream.delivery.p99",
        label: `append → SSE delivery p99 (${STREAMS} streams)`,
        unit: "ms",
        value: summary.p99,
        absolute: 50,
        detail,
      }),
    ];
  } finally {
    for (const close of closers) close();
    await api.stop();
    await db.drop();
    await deleteRedisPrefix(prefix);
  }
};
