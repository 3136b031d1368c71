import { request as httpRequest } from "node:http";
import { toHexId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { createConversationFixture, scaled } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * Bodies a hostile tenant sends, on the app routes and the agent-server mount: the upload's bytes
 * are never held by a check (it streams, its cap before anything reads it), and a NUL character is
 * refused whatever the Content-Type says.
 */
let api: TestApi;
let user: { key: string; userId: string };
let sandboxId: string;
let conversationId: string;

beforeAll(async () => {
  api = await startTestApi({ env: { AGENT_FILE_UPLOAD_MAX_BYTES: String(1024 * 1024) } });
  user = await api.newUser();
  const c = await createConversationFixture(api.database.db, { userId: user.userId });
  const sandbox = await sandboxesRepository(api.database.db).upsert({
    name: `tern-test-bodies-${c.taskId}`,
    image: "tern-sandbox:latest",
    startTaskId: c.taskId,
    conversationId: c.conversationId,
    status: "RUNNING",
  });
  await api.database.db
    .updateTable("conversations")
    .set({ sandbox_id: sandbox.id })
    .where("id", "=", c.conversationId)
    .execute();
  sandboxId = toHexId(sandbox.id);
  conversationId = toHexId(c.conversationId);
});

afterAll(async () => api?.close());

const GIB = 1024 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

/**
 * POSTs `total` bytes (one 64 KiB buffer written again and again, so the client holds no more) to
 * `path`, as a hostile client does: it goes on sending after the answer came, until the whole body
 * is sent or the server closes the connection. The API's peak RSS meanwhile is sampled every 20 ms
 * (it serves in this process).
 */
const flood = (
  path: string,
  headers: Record<string, string>,
  total: number,
): Promise<{ status: number; sent: number; peakRss: number }> =>
  new Promise((resolve) => {
    const url = new URL(path, api.url);
    let peakRss = process.memoryUsage.rss();
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }, 20);
    let sent = 0;
    let status = 0;
    let closed = false;
    const finish = () => {
      if (!closed) return;
      clearInterval(sampler);
      resolve({ status, sent, peakRss });
    };
    const req = httpRequest(url, { method: "POST", headers }, (res) => {
      status = res.statusCode ?? 0;
      res.resume();
    });
    // The server may close the connection on the rest of a refused body: the flood ends there.
    req.on("error", () => undefined);
    req.on("close", () => {
      closed = true;
      finish();
    });
    const pump = () => {
      while (!req.destroyed && sent < total) {
        const n = Math.min(CHUNK.length, total - sent);
        sent += n;
        if (!req.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) return void req.once("drain", pump);
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });

describe("an upload is never buffered by a check", () => {
  const upload = `/agent/${"SANDBOX"}/api/file/upload?path=/workspace/big.json`;
  const uploadPath = () => upload.replace("SANDBOX", sandboxId);

  for (const framing of ["content-length", "chunked"] as const) {
    it(`keeps the API's RSS flat through 1 GB labelled application/json (${framing})`, {
      timeout: scaled(300_000),
    }, async () => {
      global.gc?.();
      const before = process.memoryUsage.rss();
      const headers: Record<string, string> = {
        authorization: `Bearer ${user.key}`,
        "content-type": "application/json",
        ...(framing === "content-length" ? { "content-length": String(GIB) } : {}),
      };
      const { status, sent, peakRss } = await flood(uploadPath(), headers, GIB);
      const grew = (peakRss - before) / (1024 * 1024);
      console.log(
        `upload of 1 GB labelled JSON (${framing}): ${status}; ${(sent / 2 ** 20).toFixed(1)} MiB sent before the server closed the connection; RSS +${grew.toFixed(0)} MB`,
      );
      // Refused as what it is (not a multipart body, or past the cap), never a 500.
      expect([400, 413]).toContain(status);
      expect(grew).toBeLessThan(100);
    });
  }
});

describe("a NUL character, whatever the Content-Type", () => {
  const nulBody = '{"role": "user", "content": [{"type": "text", "text": "a\\u0000b"}], "run": false}';
  const events = `/agent/SANDBOX/api/conversations/CONVERSATION/events`;
  const eventsPath = () => events.replace("SANDBOX", sandboxId).replace("CONVERSATION", conversationId);
  const count = async () =>
    (await (
      await fetch(`${api.url}${eventsPath()}/count`, { headers: { authorization: `Bearer ${user.key}` } })
    ).json()) as number;

  it("is refused (422) on an agent-server route when the body says text/plain, and nothing is stored", async () => {
    const before = await count();
    const res = await fetch(`${api.url}${eventsPath()}`, {
      method: "POST",
      headers: { authorization: `Bearer ${user.key}`, "content-type": "text/plain" },
      body: nulBody,
    });
    const text = await res.text();
    expect(res.status, text).toBe(422);
    expect(text).toMatch(/NUL/);
    expect(await count()).toBe(before);
    // Its positive control: the same message without the NUL, as text/plain, is stored.
    const ok = await fetch(`${api.url}${eventsPath()}`, {
      method: "POST",
      headers: { authorization: `Bearer ${user.key}`, "content-type": "text/plain" },
      body: nulBody.replace("\\u0000", ""),
    });
    expect(ok.status, await ok.clone().text()).toBe(200);
    expect(await count()).toBe(before + 1);
  });

  it("is refused (422) on an app route whatever the body's type says, escaped or raw", async () => {
    for (const [body, type] of [
      ['{"name": "a\\u0000b"}', "text/plain"],
      ['{"name": "a\\u0000b"}', undefined],
      ['{"name": "a\u0000b"}', "application/octet-stream"],
    ] as const) {
      const res = await fetch(`${api.url}/api/keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${user.key}`, ...(type ? { "content-type": type } : {}) },
        body,
      });
      const text = await res.text();
      expect(res.status, `${type}: ${text}`).toBe(422);
      expect(text, `${type}`).toMatch(/NUL/);
    }
  });
});
