import { toHexId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { createConversationFixture, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

/**
 * A client's frames on both event sockets (the app server's /sockets/events/{id} and the agent
 * server's /agent/{sandbox}/sockets/events/{id}) are held to what a POST of the same message is: a
 * frame past 1 MiB closes the socket (1009) unread, each frame draws on the messages budget, a NUL
 * character is refused, and a refusal says what the client did, never what failed inside. Each
 * refusal sits beside a frame that is taken (its message stored).
 */
let t: StreamTestApi;
const MESSAGES_PER_MINUTE = 2;

beforeAll(async () => {
  t = await startStreamTestApi({ RATE_LIMIT_MESSAGES_PER_MINUTE: String(MESSAGES_PER_MINUTE) });
});
afterAll(() => t?.close());

interface Party {
  key: string;
  conversationId: string;
  sandboxId: string;
}

/** A new user (a fresh rate budget) with a conversation in a running sandbox. */
const party = async (): Promise<Party> => {
  const user = await t.api.newUser();
  const db = t.api.database.db;
  const c = await createConversationFixture(db, { userId: user.userId });
  const sandbox = await sandboxesRepository(db).upsert({
    name: `tern-test-frames-${c.taskId}`,
    image: "tern-sandbox:latest",
    startTaskId: c.taskId,
    conversationId: c.conversationId,
    status: "RUNNING",
  });
  await db.updateTable("conversations").set({ sandbox_id: sandbox.id }).where("id", "=", c.conversationId).execute();
  return { key: user.key, conversationId: toHexId(c.conversationId), sandboxId: toHexId(sandbox.id) };
};

interface Socket {
  ws: WebSocket;
  frames: Record<string, unknown>[];
  closed: Promise<{ code: number }>;
}

const open = (path: string, headers: Record<string, string>) =>
  new Promise<Socket>((resolve, reject) => {
    const ws = new WebSocket(`${t.url().replace("http", "ws")}${path}`, { headers });
    const frames: Record<string, unknown>[] = [];
    const closed = new Promise<{ code: number }>((r) => ws.on("close", (code) => r({ code })));
    ws.on("message", (data) => frames.push(JSON.parse(String(data)) as Record<string, unknown>));
    ws.on("open", () => resolve({ ws, frames, closed }));
    ws.on("error", reject);
  });

/** The user messages stored in the conversation. */
const userMessages = async (p: Party): Promise<number> => {
  const res = await t.call(`/api/v1/conversation/${p.conversationId}/events/count?kind__eq=MessageEvent`, {
    key: p.key,
  });
  return (await res.json()) as number;
};

const message = (text: string) => JSON.stringify({ role: "user", content: [{ type: "text", text }], run: false });

/** Error frames, as each socket writes them: the app server's `error`, the agent server's ServerErrorEvent. */
const errorsOf = (s: Socket) =>
  s.frames.filter((f) => f.kind === "error" || f.kind === "ServerErrorEvent").map((f) => String(f.detail));

const sockets = {
  app: (p: Party) => open(`/sockets/events/${p.conversationId}`, { authorization: `Bearer ${p.key}` }),
  "agent server": async (p: Party) => {
    const s = await open(`/agent/${p.sandboxId}/sockets/events/${p.conversationId}`, { "x-session-api-key": p.key });
    // Open once its full state came.
    await waitFor(() => s.frames.some((f) => f.key === "full_state"), { what: "the full state" });
    return s;
  },
};

for (const [name, connect] of Object.entries(sockets)) {
  describe(`the ${name} socket's client frames`, () => {
    it("closes the socket (1009) on a frame past 1 MiB, and takes one within it", async () => {
      const p = await party();
      const s = await connect(p);
      s.ws.send(message("x".repeat(512 * 1024)));
      await waitFor(async () => (await userMessages(p)) === 1, { what: "the 512 KiB message stored" });
      s.ws.send(message("x".repeat(1024 * 1024 + 1)));
      expect((await s.closed).code).toBe(1009);
      expect(await userMessages(p)).toBe(1);
    });

    it("refuses a NUL character, in words of its own, and stores nothing", async () => {
      const p = await party();
      const s = await connect(p);
      s.ws.send(message("a\u0000b"));
      await waitFor(() => errorsOf(s).length === 1, { what: "the refusal" });
      expect(errorsOf(s)[0]).toMatch(/NUL/);
      s.ws.send(message("ab"));
      await waitFor(async () => (await userMessages(p)) === 1, { what: "the message without the NUL stored" });
      s.ws.close();
    });

    it("draws each frame on the messages budget: past it, refused and not stored", async () => {
      const p = await party();
      const s = await connect(p);
      for (let i = 0; i < MESSAGES_PER_MINUTE + 2; i++) s.ws.send(message(`m${i}`));
      await waitFor(() => errorsOf(s).length === 2, { what: "two refusals" });
      expect(errorsOf(s).every((e) => /Rate limit exceeded/.test(e))).toBe(true);
      await waitFor(async () => (await userMessages(p)) === MESSAGES_PER_MINUTE, { what: "the messages within it" });
      s.ws.close();
    });
  });
}
