import { randomBytes } from "node:crypto";
import { toHexId } from "@tern/core";
import { eventsRepository, sandboxesRepository } from "@tern/db";
import { createConversationFixture, sampleEvent, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createApp } from "../src/app.ts";
import { budgetOf, createRateLimiter } from "../src/middleware/rate-limit.ts";
import { type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

/**
 * The agent-server mount (/agent/{sandbox_id}): who may call it, what its health routes
 * answer, where records point to it, and its event socket.
 */
let t: StreamTestApi;
const db = () => t.api.database.db;

interface Party {
  key: string;
  userId: string;
  conversationId: string;
  sessionApiKey: string;
  sandboxId: string;
}

/** A conversation with a running sandbox, as a start leaves it. */
const conversationWithSandbox = async (user: { key: string; userId: string }): Promise<Party> => {
  const c = await createConversationFixture(db(), { userId: user.userId });
  const sandbox = await sandboxesRepository(db()).upsert({
    name: `tern-test-agent-${c.taskId}`,
    image: "tern-sandbox:latest",
    startTaskId: c.taskId,
    conversationId: c.conversationId,
    status: "RUNNING",
  });
  await db().updateTable("conversations").set({ sandbox_id: sandbox.id }).where("id", "=", c.conversationId).execute();
  return { ...user, conversationId: c.conversationId, sessionApiKey: c.sessionApiKey, sandboxId: sandbox.id };
};

let alice: Party;
/** Alice's second sandbox: its session key must not open the first. */
let alice2: Party;
let bob: Party;

beforeAll(async () => {
  t = await startStreamTestApi();
  const a = await t.api.newUser();
  alice = await conversationWithSandbox(a);
  alice2 = await conversationWithSandbox(a);
  bob = await conversationWithSandbox(await t.api.newUser());
});
afterAll(() => t?.close());

const agent = (p: { sandboxId: string }, path: string) => `/agent/${toHexId(p.sandboxId)}${path}`;

/** A request with exactly these headers (no default key). */
const call = (path: string, headers: Record<string, string> = {}) => fetch(`${t.url()}${path}`, { headers });

// A path behind the mount's key check that no route group answers yet: past the check it is 404.
const PROBE = "/api/no-such-route";

describe("agent-server mount: health", () => {
  it("answers /alive, /health, /ready and /server_info without a key, alike for any sandbox id", async () => {
    for (const id of [toHexId(alice.sandboxId), randomBytes(16).toString("hex"), "not-an-id"]) {
      for (const path of ["/alive", "/health"]) {
        const res = await call(`/agent/${id}${path}`);
        expect(res.status, path).toBe(200);
        expect(await res.json()).toEqual({ status: "ok" });
      }
      const ready = await call(`/agent/${id}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: "ready" });
    }
    const info = (await (await call(agent(bob, "/server_info"))).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ title: "OpenHands Agent Server", docs: "/docs", redoc: "/redoc" });
    expect(info.usable_tools).toEqual(expect.arrayContaining(["terminal", "file_editor"]));
    expect(typeof info.uptime).toBe("number");
  });
});

describe("agent-server mount: X-Session-API-Key", () => {
  const passes = async (res: Response) => {
    // Past the key check: no route there yet.
    expect(res.status).toBe(404);
    expect(((await res.json()) as { detail: string }).detail).toBe("Not Found");
  };
  const refused = async (res: Response) => {
    expect(res.status).toBe(401);
    expect(((await res.json()) as { detail: string }).detail).toBe("Unauthorized");
  };

  it("takes the session key of a conversation of this sandbox", async () => {
    await passes(await call(agent(alice, PROBE), { "x-session-api-key": alice.sessionApiKey }));
  });

  it("takes the owner's API key, as X-Session-API-Key or as a Bearer token", async () => {
    await passes(await call(agent(alice, PROBE), { "x-session-api-key": alice.key }));
    await passes(await call(agent(alice, PROBE), { authorization: `Bearer ${alice.key}` }));
  });

  it("refuses another sandbox's session key (401), the owner's own other sandbox included", async () => {
    await refused(await call(agent(alice, PROBE), { "x-session-api-key": alice2.sessionApiKey }));
    await refused(await call(agent(alice, PROBE), { "x-session-api-key": bob.sessionApiKey }));
    await refused(await call(agent(bob, PROBE), { "x-session-api-key": alice.sessionApiKey }));
  });

  it("refuses no key and an unknown key (401)", async () => {
    await refused(await call(agent(alice, PROBE)));
    await refused(await call(agent(alice, PROBE), { "x-session-api-key": "sess_nope" }));
    await refused(await call(agent(alice, PROBE), { authorization: "Bearer oh_nope" }));
  });

  it("answers a known path asked with another method 405, as FastAPI does", async () => {
    const res = await fetch(`${t.url()}${agent(alice, "/alive")}`, {
      method: "POST",
      headers: { "x-session-api-key": alice.sessionApiKey },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
    expect(((await res.json()) as { detail: string }).detail).toBe("Method Not Allowed");
  });

  it("answers another user's sandbox as it answers an unknown one (404), to an API key", async () => {
    const other = await call(agent(bob, PROBE), { "x-session-api-key": alice.key });
    const unknown = await call(`/agent/${randomBytes(16).toString("hex")}${PROBE}`, { "x-session-api-key": alice.key });
    expect(other.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(await other.json()).toEqual(await unknown.json());
  });

  it("keeps the app routes' key check off the mount, and the mount's off the app routes", async () => {
    // A session key may not call the app server's sandbox listing; it may reach its own agent server.
    const app = await call("/api/v1/sandboxes/search", { "x-session-api-key": alice.sessionApiKey });
    expect(app.status).toBe(401);
    await passes(await call(agent(alice, PROBE), { "x-session-api-key": alice.sessionApiKey }));
  });
});

describe("agent-server mount: rate limit", () => {
  it("draws on the key's budget of the app routes: a poll storm is held at the limit", async () => {
    const limited = createApp({
      ...t.api.deps,
      rateLimiter: createRateLimiter(t.api.redis, `${t.api.prefix}:agent-rl-${randomBytes(4).toString("hex")}`, {
        RATE_LIMIT_PER_MINUTE: 5,
        RATE_LIMIT_STARTS_PER_MINUTE: 0,
        RATE_LIMIT_MESSAGES_PER_MINUTE: 0,
      }),
    });
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await limited.request(agent(alice, PROBE), { headers: { "x-session-api-key": alice.sessionApiKey } });
      statuses.push(res.status);
      if (res.status === 429) expect(res.headers.get("retry-after")).not.toBeNull();
    }
    expect(statuses).toEqual([404, 404, 404, 404, 404, 429, 429, 429]);
    // The owner's API key is its own budget, shared with the app routes.
    const viaApp = await limited.request("/api/v1/sandboxes/search", {
      headers: { authorization: `Bearer ${alice.key}` },
    });
    expect(viaApp.status).toBe(200);
    expect(viaApp.headers.get("ratelimit-remaining")).toBe("4");
    const viaAgent = await limited.request(agent(alice, PROBE), { headers: { "x-session-api-key": alice.key } });
    expect(viaAgent.headers.get("ratelimit-remaining")).toBe("3");
  });

  it("counts a start and a message on the agent server against the same budgets as on the app server", () => {
    expect(budgetOf("POST", "/agent/abc/api/conversations")).toBe("starts");
    expect(budgetOf("POST", "/agent/abc/api/conversations/def/events")).toBe("messages");
    expect(budgetOf("POST", "/agent/abc/api/conversations/def/events/respond_to_confirmation")).toBeNull();
    expect(budgetOf("GET", "/agent/abc/api/conversations")).toBeNull();
  });
});

describe("agent_server_url on the records", () => {
  it("the sandbox lists its agent server in exposed_urls while RUNNING; the conversation names it", async () => {
    const url = `http://api.test/agent/${toHexId(alice.sandboxId)}`;
    const sandboxes = (await (
      await t.api.call(`/api/v1/sandboxes?id=${toHexId(alice.sandboxId)}`, { key: alice.key })
    ).json()) as { exposed_urls: unknown }[];
    expect(sandboxes[0]?.exposed_urls).toEqual([{ name: "AGENT_SERVER", url, port: 80 }]);
    const conversations = (await (
      await t.api.call(`/api/v1/app-conversations?ids=${toHexId(alice.conversationId)}`, { key: alice.key })
    ).json()) as { agent_server_url: string }[];
    expect(conversations[0]?.agent_server_url).toBe(url);
  });
});

interface Socket {
  ws: WebSocket;
  events: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
}

const openSocket = (path: string, headers: Record<string, string> = {}) =>
  new Promise<Socket>((resolve, reject) => {
    const ws = new WebSocket(`${t.url().replace("http", "ws")}${path}`, { headers });
    const events: Record<string, unknown>[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on("close", (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.on("message", (data) => events.push(JSON.parse(String(data)) as Record<string, unknown>));
    ws.on("open", () => resolve({ ws, events, closed }));
    ws.on("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on("error", reject);
  });

const socketPath = (p: Party, conversationId: string, query = "") =>
  agent(p, `/sockets/events/${toHexId(conversationId)}${query}`);

const authFrame = (key: string) => JSON.stringify({ type: "auth", session_api_key: key });

describe("agent-server socket /sockets/events/{id}", () => {
  it("authenticates by a first frame, then resends every event with resend_mode=all and follows new ones", async () => {
    const stored = await eventsRepository(db()).append(alice.conversationId, [
      sampleEvent("MessageEvent", 1),
      sampleEvent("ActionEvent", 2),
    ]);
    const s = await openSocket(socketPath(alice, alice.conversationId, "?resend_mode=all"));
    s.ws.send(authFrame(alice.sessionApiKey));
    await waitFor(() => s.events.length >= stored.length + 1, { what: "the state, then the stored events" });
    const [added] = await eventsRepository(db()).append(alice.conversationId, [sampleEvent("MessageEvent", 3)]);
    await waitFor(() => s.events.some((e) => e.id === added?.id), { what: "the new event" });
    // First the conversation's whole state, as the agent server sends on every subscription (the
    // SDK's RemoteConversation waits for it), then the stored events.
    expect(s.events[0]).toMatchObject({ kind: "ConversationStateUpdateEvent", key: "full_state" });
    expect((s.events[0] as { value: { execution_status: string } }).value.execution_status).toBeTypeOf("string");
    expect(s.events.slice(1, 3).map((e) => e.id)).toEqual(stored.map((e) => e.id));
    // A second auth frame is ignored, as OpenHands does.
    s.ws.send(authFrame(alice.sessionApiKey));
    s.ws.close();
  });

  it("closes 4001 for a bad first frame, another sandbox's key, or a bad legacy query key", async () => {
    const wrongKey = await openSocket(socketPath(alice, alice.conversationId));
    wrongKey.ws.send(authFrame(alice2.sessionApiKey));
    expect((await wrongKey.closed).code).toBe(4001);

    const notAuth = await openSocket(socketPath(alice, alice.conversationId));
    notAuth.ws.send(JSON.stringify({ role: "user", content: [{ type: "text", text: "hi" }] }));
    expect((await notAuth.closed).code).toBe(4001);

    const legacy = await openSocket(socketPath(alice, alice.conversationId, `?session_api_key=${bob.sessionApiKey}`));
    expect((await legacy.closed).code).toBe(4001);
  });

  it("closes 4004 for an unknown conversation, or one of another sandbox", async () => {
    const unknown = await openSocket(socketPath(alice, randomBytes(16).toString("hex")));
    unknown.ws.send(authFrame(alice.sessionApiKey));
    expect((await unknown.closed).code).toBe(4004);
    // Alice's own conversation, but on her other sandbox: not this agent server's.
    const elsewhere = await openSocket(socketPath(alice, alice2.conversationId));
    elsewhere.ws.send(authFrame(alice.key));
    expect((await elsewhere.closed).code).toBe(4004);
  });

  it("resend_mode=since sends the events at or after after_timestamp, with the legacy query key", async () => {
    const c = await conversationWithSandbox({ key: alice.key, userId: alice.userId });
    const early = await eventsRepository(db()).append(c.conversationId, [sampleEvent("MessageEvent", 1)]);
    await waitFor(async () => Date.now() > Date.parse(early[0]?.timestamp ?? "") + 5, { what: "a later instant" });
    const late = await eventsRepository(db()).append(c.conversationId, [
      sampleEvent("MessageEvent", 2),
      sampleEvent("MessageEvent", 3),
    ]);
    const since = late[0]?.timestamp ?? "";
    const s = await openSocket(
      socketPath(c, c.conversationId, `?resend_mode=since&after_timestamp=${encodeURIComponent(since)}`),
      { "x-session-api-key": c.sessionApiKey },
    );
    await waitFor(() => s.events.length >= 3, { what: "the state, then the events since" });
    expect(s.events[0]).toMatchObject({ kind: "ConversationStateUpdateEvent", key: "full_state" });
    expect(s.events.slice(1).map((e) => e.id)).toEqual(late.map((e) => e.id));
    s.ws.close();
  });

  it("takes a client frame as the user's message (stored as the POST message route stores it)", async () => {
    const c = await conversationWithSandbox({ key: alice.key, userId: alice.userId });
    const s = await openSocket(socketPath(c, c.conversationId));
    s.ws.send(authFrame(c.sessionApiKey));
    // The socket follows from the latest event: wait until it does (an auth round trip), then send.
    await waitFor(
      async () => {
        s.ws.send(JSON.stringify({ role: "user", content: [{ type: "text", text: "hello from a socket" }] }));
        return s.events.some((e) => e.kind === "MessageEvent" && JSON.stringify(e).includes("hello from a socket"));
      },
      { what: "the user's message on the socket", intervalMs: 500 },
    );
    const first = s.events.find((e) => e.kind === "MessageEvent");
    expect(first).toMatchObject({ source: "user" });
    s.ws.close();
  });
});
