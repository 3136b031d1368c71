import { toHexId } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { createConversationFixture, sampleEvent, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

let t: StreamTestApi;
let key: string;
let userId: string;

beforeAll(async () => {
  t = await startStreamTestApi();
  ({ key, userId } = await t.api.newUser());
});
afterAll(() => t?.close());

const db = () => t.api.database.db;

interface Socket {
  ws: WebSocket;
  events: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
}

/** Opens the socket; resolves once open, or with the HTTP status the upgrade was refused with. */
const connect = (path: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) =>
  new Promise<Socket | { status: number }>((resolve, reject) => {
    const ws = new WebSocket(`${t.url().replace("http", "ws")}${path}`, { headers });
    const events: Record<string, unknown>[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on("close", (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.on("message", (data) => events.push(JSON.parse(String(data)) as Record<string, unknown>));
    ws.on("open", () => resolve({ ws, events, closed }));
    ws.on("unexpected-response", (_req, res) => resolve({ status: res.statusCode ?? 0 }));
    ws.on("error", reject);
  });

const open = async (path: string, headers?: Record<string, string>): Promise<Socket> => {
  const s = await connect(path, headers);
  if ("status" in s) throw new Error(`upgrade refused: ${s.status}`);
  return s;
};

describe("/sockets/events/{id} (OpenHands agent-server socket)", () => {
  it("resend_all=true sends the stored events, then new ones; without it only new ones", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const stored = await eventsRepository(db()).append(conversationId, [
      sampleEvent("MessageEvent", 1),
      sampleEvent("ActionEvent", 2),
    ]);
    const all = await open(`/sockets/events/${toHexId(conversationId)}?resend_all=true`);
    const fresh = await open(`/sockets/events/${toHexId(conversationId)}`);
    await waitFor(() => all.events.length === 2, { what: "the stored events" });
    const [added] = await eventsRepository(db()).append(conversationId, [sampleEvent("MessageEvent", 3)]);
    await waitFor(() => all.events.length === 3 && fresh.events.length === 1, { what: "the new event on both" });
    expect(all.events.map((e) => e.id)).toEqual([...stored.map((e) => e.id), added?.id]);
    expect(fresh.events[0]?.id).toBe(added?.id);
    all.ws.close();
    fresh.ws.close();
  });

  it("after=<last event id> resumes with no gap and no duplicate", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const events = await eventsRepository(db()).append(
      conversationId,
      Array.from({ length: 10 }, (_, i) => sampleEvent("MessageEvent", i)),
    );
    const resumed = await open(`/sockets/events/${toHexId(conversationId)}?after=${events[3]?.id}`);
    await waitFor(() => resumed.events.length === 6, { what: "the six events after the fourth" });
    expect(resumed.events.map((e) => e.id)).toEqual(events.slice(4).map((e) => e.id));
    resumed.ws.close();
  });

  it("takes the session key in the query, refuses another user (404) and a bad after (400)", async () => {
    const { conversationId, sessionApiKey } = await createConversationFixture(db(), { userId });
    await eventsRepository(db()).append(conversationId, [sampleEvent("MessageEvent", 1)]);
    const viaSession = await open(
      `/sockets/events/${toHexId(conversationId)}?resend_all=true&session_api_key=${sessionApiKey}`,
      {},
    );
    await waitFor(() => viaSession.events.length === 1, { what: "its event" });
    viaSession.ws.close();
    const stranger = await t.api.newUser();
    expect(
      await connect(`/sockets/events/${toHexId(conversationId)}`, { authorization: `Bearer ${stranger.key}` }),
    ).toEqual({ status: 404 });
    expect(await connect(`/sockets/events/${toHexId(conversationId)}?after=nonsense`)).toEqual({ status: 400 });
    expect(await connect(`/sockets/events/${toHexId(conversationId)}`, {})).toEqual({ status: 401 });
  });

  it("a message sent on the socket is stored as the user's", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const s = await open(`/sockets/events/${toHexId(conversationId)}`);
    s.ws.send(JSON.stringify({ role: "user", content: [{ type: "text", text: "hello agent" }], run: false }));
    await waitFor(() => s.events.some((e) => e.kind === "MessageEvent" && e.source === "user"), {
      what: "the message back on the socket",
    });
    s.ws.close();
  });

  it("closes sockets at shutdown with 1001", async () => {
    const other = await startStreamTestApi();
    try {
      const user = await other.api.newUser();
      const { conversationId } = await createConversationFixture(other.api.database.db, { userId: user.userId });
      const ws = new WebSocket(`${other.url().replace("http", "ws")}/sockets/events/${toHexId(conversationId)}`, {
        headers: { authorization: `Bearer ${user.key}` },
      });
      const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
      await new Promise((r) => ws.on("open", r));
      await waitFor(() => other.hub().openStreams === 1, { what: "the socket to be tracked" });
      other.hub().closeAll();
      expect(await closed).toBe(1001);
    } finally {
      await other.close();
    }
  });
});
