import http from "node:http";
import { newEvent, parseId, toHexId } from "@tern/core";
import { eventsRepository, startTasksRepository } from "@tern/db";
import { createConversationFixture, sampleEvent, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSse, type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

let t: StreamTestApi;
let key: string;
let userId: string;

beforeAll(async () => {
  t = await startStreamTestApi({ STREAM_HEARTBEAT_MS: "200" });
  ({ key, userId } = await t.api.newUser());
});
afterAll(() => t?.close());

const db = () => t.api.database.db;
const auth = () => ({ authorization: `Bearer ${key}` });
const streamPath = (conversationId: string, query = "") =>
  `/api/v1/conversation/${toHexId(conversationId)}/events/stream${query}`;
const append = (conversationId: string, n: number) =>
  eventsRepository(db()).append(conversationId, [sampleEvent("MessageEvent", n)]);

describe("GET /api/v1/conversation/{id}/events/stream", () => {
  it("sends every stored event, then each new one as it is appended, with keepalives in between", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const stored = await eventsRepository(db()).append(conversationId, [
      sampleEvent("MessageEvent", 1),
      sampleEvent("ActionEvent", 2),
    ]);
    const sse = await openSse(`${t.url()}${streamPath(conversationId)}`, auth());
    expect(sse.status).toBe(200);
    await waitFor(() => sse.events().length === 2, { what: "the stored events" });
    const [added] = await append(conversationId, 3);
    await waitFor(() => sse.events().length === 3, { what: "the appended event" });
    expect(sse.events().map((e) => e.data.id)).toEqual([...stored.map((e) => e.id), added?.id]);
    await waitFor(() => sse.frames.some((f) => f.comment === "keepalive"), { what: "a keepalive comment" });
    sse.close();
  });

  it("filters by kind and timestamp like the search", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const [first] = await eventsRepository(db()).append(conversationId, [sampleEvent("MessageEvent", 1)]);
    await eventsRepository(db()).append(conversationId, [
      sampleEvent("ActionEvent", 2),
      sampleEvent("MessageEvent", 3),
    ]);
    const sse = await openSse(
      `${t.url()}${streamPath(conversationId, `?kind__eq=MessageEvent&timestamp__gte=${first?.timestamp}`)}`,
      auth(),
    );
    await append(conversationId, 4);
    await waitFor(() => sse.events().length === 3, { what: "three MessageEvents" });
    expect(sse.events().every((e) => e.data.kind === "MessageEvent")).toBe(true);
    sse.close();
  });

  it("a client cut off mid-run and resumed with Last-Event-ID sees every event exactly once, across an API restart", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const total = 300;
    // The agent appends while the client comes and goes.
    const writer = (async () => {
      for (let n = 0; n < total; n += 3) {
        await eventsRepository(db()).append(conversationId, [
          sampleEvent("ActionEvent", n),
          sampleEvent("ObservationEvent", n + 1),
          sampleEvent("MessageEvent", n + 2),
        ]);
      }
    })();
    const seen: string[] = [];
    let lastId: string | undefined;
    for (let round = 0; seen.length < total; round++) {
      if (round === 2) await t.restart(); // a new API process: nothing in memory survives
      const headers: Record<string, string> = { ...auth(), ...(lastId ? { "last-event-id": lastId } : {}) };
      const sse = await openSse(`${t.url()}${streamPath(conversationId)}`, headers);
      expect(sse.status).toBe(200);
      // Read some, then drop the connection mid-stream.
      const want = Math.min(total, seen.length + 40);
      await waitFor(() => seen.length + sse.events().length >= want, { what: `${want} events` });
      sse.close();
      await sse.ended;
      for (const e of sse.events()) {
        seen.push(e.data.id as string);
        lastId = e.id;
      }
    }
    await writer;
    const all = (await eventsRepository(db()).listAll(conversationId)).map((e) => e.id);
    expect(seen).toEqual(all);
    expect(new Set(seen).size).toBe(total);
  });

  it("?after= resumes like Last-Event-ID", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    await eventsRepository(db()).append(conversationId, [
      sampleEvent("MessageEvent", 1),
      sampleEvent("MessageEvent", 2),
    ]);
    const first = await openSse(`${t.url()}${streamPath(conversationId)}`, auth());
    await waitFor(() => first.events().length === 2, { what: "two events" });
    first.close();
    const after = first.events()[0]?.id as string;
    const resumed = await openSse(
      `${t.url()}${streamPath(conversationId, `?after=${encodeURIComponent(after)}`)}`,
      auth(),
    );
    await waitFor(() => resumed.events().length === 1, { what: "the second event" });
    expect(resumed.events()[0]?.data.id).toBe(first.events()[1]?.data.id);
    resumed.close();
  });

  it("a malformed or foreign Last-Event-ID is 400; another user's conversation is 404", async () => {
    const mine = await createConversationFixture(db(), { userId });
    const other = await createConversationFixture(db(), { userId });
    await append(other.conversationId, 1);
    const sse = await openSse(`${t.url()}${streamPath(other.conversationId)}`, auth());
    await waitFor(() => sse.events().length === 1, { what: "one event" });
    sse.close();
    const foreignId = sse.events()[0]?.id as string;

    for (const bad of ["garbage", "eyJ0IjoiMjAyNiJ9.AAAA", foreignId]) {
      const res = await t.call(streamPath(mine.conversationId), { key, headers: { "last-event-id": bad } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("bad_request");
    }
    const res = await t.call(streamPath(mine.conversationId, "?after=nope"), { key });
    expect(res.status).toBe(400);

    const stranger = await t.api.newUser();
    const denied = await t.call(streamPath(mine.conversationId), { key: stranger.key });
    expect(denied.status).toBe(404);
  });

  it("a session key streams its own conversation, and no other", async () => {
    const mine = await createConversationFixture(db(), { userId });
    const other = await createConversationFixture(db(), { userId });
    await append(mine.conversationId, 1);
    const sse = await openSse(`${t.url()}${streamPath(mine.conversationId)}`, {
      "x-session-api-key": mine.sessionApiKey,
    });
    expect(sse.status).toBe(200);
    await waitFor(() => sse.events().length === 1, { what: "its event" });
    sse.close();
    const res = await t.call(streamPath(other.conversationId), {
      headers: { "x-session-api-key": mine.sessionApiKey },
    });
    expect(res.status).toBe(404);
  });

  it("200 concurrent streams on one API process each see an appended event", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const clients = await Promise.all(
      Array.from({ length: 200 }, () => openSse(`${t.url()}${streamPath(conversationId)}`, auth())),
    );
    expect(clients.every((c) => c.status === 200)).toBe(true);
    const [event] = await append(conversationId, 1);
    await waitFor(() => clients.every((c) => c.events().some((e) => e.data.id === event?.id)), {
      what: "the event on all 200 streams",
      detail: () => `${clients.filter((c) => c.events().length > 0).length} of 200 saw it`,
    });
    for (const c of clients) c.close();
  });

  it("a client slower than the stream is disconnected with a resumable id, not buffered without bound", async () => {
    const slow = await startStreamTestApi({ STREAM_BUFFER_BYTES: "4096", STREAM_SLOW_CLIENT_MS: "300" });
    try {
      const user = await slow.api.newUser();
      const sdb = slow.api.database.db;
      const { conversationId } = await createConversationFixture(sdb, { userId: user.userId });
      const big = "x".repeat(80_000);
      const total = 120;
      // A client that reads three events, then stops reading: the socket fills, then the stream's buffer.
      const received = await new Promise<string>((resolve, reject) => {
        const req = http.get(
          `${slow.url()}${streamPath(conversationId)}`,
          { headers: { authorization: `Bearer ${user.key}` } },
          (res) => {
            if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
            let text = "";
            let paused = false;
            res.on("data", (c: Buffer) => {
              text += c.toString("utf8");
              if (paused || (text.match(/\nid: /g) ?? []).length < 4) return;
              paused = true;
              res.pause();
              // A paused socket reads nothing, so it cannot see the server's close: wait until the
              // server says it dropped the stream, then read what the kernel kept, to the end.
              waitFor(() => slow.hub().openStreams === 0, { what: "the server to drop the slow client" })
                .then(() => res.resume())
                .catch(reject);
            });
            res.on("close", () => resolve(text));
            res.on("error", () => resolve(text));
            (async () => {
              for (let i = 0; i < total; i += 40) {
                const drafts = Array.from({ length: 40 }, (_, j) =>
                  newEvent.agentMessage(`${i + j} ${big}`, { llm_response_id: `r${i + j}`, history_seq: i + j }),
                );
                await eventsRepository(sdb).append(conversationId, drafts);
              }
            })().catch(reject);
          },
        );
        req.on("error", () => undefined);
      });
      // The server cut it (the client never closed). Its last complete frame's id resumes it.
      const complete = received.split("\n\n").slice(0, -1);
      const ids = complete.flatMap((b) => /^id: (.*)$/m.exec(b)?.[1] ?? []);
      expect(ids.length).toBeGreaterThanOrEqual(3);
      expect(ids.length).toBeLessThan(total);
      const resumed = await openSse(`${slow.url()}${streamPath(conversationId)}`, {
        authorization: `Bearer ${user.key}`,
        "last-event-id": ids.at(-1) as string,
      });
      await waitFor(() => resumed.events().length >= total - ids.length, {
        what: "the rest of the events",
        timeoutMs: 60_000,
        intervalMs: 200,
      });
      resumed.close();
      const all = (await eventsRepository(sdb).listAll(conversationId)).map((e) => e.id);
      expect(resumed.events().map((e) => e.data.id)).toEqual(all.slice(ids.length));
    } finally {
      await slow.close();
    }
  });

  it("closes every stream cleanly at shutdown with a shutdown frame", async () => {
    const other = await startStreamTestApi();
    try {
      const user = await other.api.newUser();
      const { conversationId } = await createConversationFixture(other.api.database.db, { userId: user.userId });
      const sse = await openSse(`${other.url()}${streamPath(conversationId)}`, { authorization: `Bearer ${user.key}` });
      other.hub().closeAll();
      await sse.ended;
      expect(sse.frames.at(-1)?.event).toBe("shutdown");
    } finally {
      await other.close();
    }
  });
});

describe("GET /api/v1/app-conversations/start-tasks/{id}/stream", () => {
  it("sends each stage as it begins and closes at READY", async () => {
    const tasks = startTasksRepository(db());
    const task = await tasks.create(userId, { title: "stream" });
    const sse = await openSse(`${t.url()}/api/v1/app-conversations/start-tasks/${toHexId(task.id)}/stream`, auth());
    expect(sse.status).toBe(200);
    await waitFor(() => sse.frames.some((f) => f.id === "WORKING"), { what: "WORKING" });
    const { conversationId } = await createConversationFixture(db(), { userId });
    // Three stages committed at once, as a fast start passes them: their notifications arrive
    // together, and the first one's read already finds READY. Each stage is still sent.
    await db()
      .transaction()
      .execute(async (trx) => {
        await trx.updateTable("start_tasks").set({ status: "WAITING_FOR_SANDBOX" }).where("id", "=", task.id).execute();
        await trx
          .updateTable("start_tasks")
          .set({ status: "PREPARING_REPOSITORY" })
          .where("id", "=", task.id)
          .execute();
        await trx
          .updateTable("start_tasks")
          .set({ status: "READY", app_conversation_id: conversationId })
          .where("id", "=", task.id)
          .execute();
      });
    await sse.ended;
    expect(sse.frames.filter((f) => f.id).map((f) => f.id)).toEqual([
      "WORKING",
      "WAITING_FOR_SANDBOX",
      "PREPARING_REPOSITORY",
      "READY",
    ]);
    const last = JSON.parse(sse.frames.at(-1)?.data ?? "{}") as { app_conversation_id: string };
    expect(last.app_conversation_id).toBe(toHexId(conversationId));
  });

  it("is 404 for another user's task", async () => {
    const task = await startTasksRepository(db()).create(userId, { title: "x" });
    const stranger = await t.api.newUser();
    const res = await t.call(`/api/v1/app-conversations/start-tasks/${toHexId(task.id)}/stream`, { key: stranger.key });
    expect(res.status).toBe(404);
  });
});

describe("POST /api/v1/app-conversations/stream-start on a process with the change feed", () => {
  it("writes each stage as it commits, stages passed between two reads included, and ends the array at READY", async () => {
    const res = await t.call("/api/v1/app-conversations/stream-start", {
      method: "POST",
      key,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ title: "streamed start" }),
    });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    const read = async () => {
      const { value, done } = await reader.read();
      if (value) text += decoder.decode(value, { stream: true });
      return done;
    };
    const statuses = () => [...text.matchAll(/"status":"([A-Z_]+)"/g)].map((m) => m[1]);
    const until = async (status: string) => {
      while (!statuses().includes(status)) if (await read()) break;
    };
    await until("WORKING");
    const taskId = (/"id":"([0-9a-f]+)"/.exec(text) as RegExpExecArray)[1] as string;
    const { conversationId } = await createConversationFixture(db(), { userId });
    const set = (values: Record<string, unknown>) =>
      db()
        .updateTable("start_tasks")
        .set(values)
        .where("id", "=", parseId(taskId) as string)
        .execute();
    await set({ status: "WAITING_FOR_SANDBOX" });
    await until("WAITING_FOR_SANDBOX");
    // Two stages in one go: the one passed on the way is still written (stage_durations names it).
    await set({ status: "RUNNING_SETUP_SCRIPT", stage_durations: { WAITING_FOR_SANDBOX: 5, PREPARING_REPOSITORY: 3 } });
    await until("RUNNING_SETUP_SCRIPT");
    await set({ status: "READY", app_conversation_id: conversationId });
    while (!(await read()));
    const snapshots = JSON.parse(text) as { status: string; app_conversation_id: string | null }[];
    expect(snapshots.map((s) => s.status)).toEqual([
      "WORKING",
      "WAITING_FOR_SANDBOX",
      "PREPARING_REPOSITORY",
      "RUNNING_SETUP_SCRIPT",
      "READY",
    ]);
    expect(snapshots.at(-1)?.app_conversation_id).toBe(toHexId(conversationId));
  });
});
