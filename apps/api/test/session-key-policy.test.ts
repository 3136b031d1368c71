import { generateSessionApiKey, newId, sealSessionApiKey, toHexId } from "@tern/core";
import { sandboxesRepository, startTasksRepository } from "@tern/db";
import { createConversationFixture } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * What each key that is not an API key may do (README, "Keys"), as a hostile holder of one tries:
 * - a conversation's read-only key (what the page signs in read-only, to share a conversation)
 *   reads that conversation and its events, and nothing else: no secret, no command, no message;
 * - a conversation's session key is its agent server's key: its own conversation there (and its
 *   sandbox's workspace), never another conversation of the sandbox, never a new conversation on
 *   the operator's LLM key, never the owner's secrets;
 * - a sandbox's own key reads the owner's secrets for that sandbox (the positive control).
 * Each refusal sits beside what the same key may do, asked in the same test.
 */
let api: TestApi;
let owner: { key: string; userId: string };
/** A sandbox of its own (POST /api/v1/sandboxes) with two conversations in it. */
let sandbox: { id: string; key: string };
let first: { id: string; sessionKey: string };
let second: { id: string };
let readOnlyKey: string;

const SECRET_VALUE = "owner-secret-deploy-token-51c3";

/** A conversation of the owner's in the sandbox. */
const conversationIn = async (sandboxId: string) => {
  const c = await createConversationFixture(api.database.db, { userId: owner.userId });
  await api.database.db
    .updateTable("conversations")
    .set({ sandbox_id: sandboxId })
    .where("id", "=", c.conversationId)
    .execute();
  return { id: toHexId(c.conversationId), sessionKey: c.sessionApiKey };
};

beforeAll(async () => {
  api = await startTestApi();
  owner = await api.newUser();
  const task = await startTasksRepository(api.database.db).create(owner.userId, {}, newId(), "sandbox");
  const id = newId();
  const key = generateSessionApiKey();
  await sandboxesRepository(api.database.db).upsert({
    id,
    name: `tern-test-keys-${id}`,
    image: "tern-sandbox:latest",
    startTaskId: task.id,
    status: "RUNNING",
    sessionApiKey: sealSessionApiKey(api.secretBox, id, key),
  });
  sandbox = { id: toHexId(id), key };
  first = await conversationIn(id);
  second = await conversationIn(id);
  const saved = await api.call("/api/v1/secrets", {
    key: owner.key,
    method: "POST",
    json: { name: "DEPLOY_TOKEN", value: SECRET_VALUE },
  });
  expect(saved.status).toBeLessThan(300);
  const minted = await api.call(`/api/v1/app-conversations/${first.id}/read-only-key`, {
    key: owner.key,
    method: "POST",
  });
  expect(minted.status).toBe(200);
  readOnlyKey = ((await minted.json()) as { key: string }).key;
});

afterAll(async () => api?.close());

const as = (key: string, path: string, init: { method?: string; json?: unknown } = {}) =>
  fetch(`${api.url}${path}`, {
    method: init.method ?? "GET",
    headers: {
      "x-session-api-key": key,
      ...(init.json === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
  });

const secretPath = () => `/api/v1/sandboxes/${sandbox.id}/settings/secrets/DEPLOY_TOKEN`;
const agent = (path: string) => `/agent/${sandbox.id}${path}`;

describe("a conversation's read-only key", () => {
  it("reads its conversation and its events", async () => {
    const records = await as(readOnlyKey, `/api/v1/app-conversations?ids=${first.id}`);
    expect(records.status).toBe(200);
    expect(((await records.json()) as ({ id: string } | null)[])[0]?.id).toBe(first.id);
    expect((await as(readOnlyKey, `/api/v1/conversation/${first.id}/events/search`)).status).toBe(200);
    // Another conversation, even of the same owner and sandbox: not reached.
    expect((await as(readOnlyKey, `/api/v1/conversation/${second.id}/events/search`)).status).toBe(404);
  });

  it("reads no secret, runs no command, sends nothing, changes nothing", async () => {
    const refused: [string, string, unknown?][] = [
      ["GET", secretPath()],
      ["GET", `/api/v1/sandboxes/${sandbox.id}/settings/secrets`],
      ["POST", agent("/api/bash/execute_bash_command"), { command: "id" }],
      ["POST", agent("/api/bash/start_bash_command"), { command: "id" }],
      ["GET", agent(`/api/conversations/${first.id}`)],
      ["POST", `/api/v1/conversation/${first.id}/interrupt`],
      ["POST", `/api/v1/conversation/${first.id}/events/respond_to_confirmation`, { accept: true }],
      ["POST", `/api/v1/conversation/${first.id}/events`, { role: "user", content: [{ type: "text", text: "x" }] }],
      ["POST", `/api/v1/conversation/${first.id}/confirmation_policy`, { policy: { kind: "NeverConfirm" } }],
    ];
    for (const [method, path, json] of refused) {
      const res = await as(readOnlyKey, path, { method, json });
      const text = await res.text();
      expect(res.status, `${method} ${path}: ${text}`).toBe(401);
      expect(text).not.toContain(SECRET_VALUE);
    }
  });

  it("is what the page signs in read-only; the session key is not", async () => {
    const signIn = async (key: string) =>
      (await (
        await fetch(`${api.url}/conversations/session`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ key }),
        })
      ).json()) as { signed_in: boolean; read_only: boolean; follow_up: boolean };
    expect(await signIn(readOnlyKey)).toEqual({ signed_in: true, read_only: true, follow_up: false });
    expect(await signIn(first.sessionKey)).toEqual({ signed_in: true, read_only: false, follow_up: false });
    expect(await signIn(owner.key)).toEqual({ signed_in: true, read_only: false, follow_up: true });
  });

  it("is refused when forged, and once its conversation is deleted", async () => {
    const forged = `${readOnlyKey.slice(0, -4)}AAAA`;
    expect((await as(forged, `/api/v1/app-conversations?ids=${first.id}`)).status).toBe(401);
    // A conversation with no sandbox: its deletion waits on no sandbox command.
    const made = await createConversationFixture(api.database.db, { userId: owner.userId });
    const doomed = { id: toHexId(made.conversationId) };
    const minted = await api.call(`/api/v1/app-conversations/${doomed.id}/read-only-key`, {
      key: owner.key,
      method: "POST",
    });
    const key = ((await minted.json()) as { key: string }).key;
    expect((await as(key, `/api/v1/app-conversations?ids=${doomed.id}`)).status).toBe(200);
    expect(
      (await api.call(`/api/v1/app-conversations/${doomed.id}`, { key: owner.key, method: "DELETE" })).status,
    ).toBe(200);
    expect((await as(key, `/api/v1/app-conversations?ids=${doomed.id}`)).status).toBe(401);
  });
});

describe("a conversation's session key on its agent server", () => {
  it("reads no secret of the owner's; the sandbox's own key does", async () => {
    for (const path of [secretPath(), `/api/v1/sandboxes/${sandbox.id}/settings/secrets`]) {
      const res = await as(first.sessionKey, path);
      const text = await res.text();
      expect(res.status, `${path}: ${text}`).toBe(401);
      expect(text).not.toContain(SECRET_VALUE);
    }
    const own = await as(sandbox.key, secretPath());
    expect(own.status).toBe(200);
    expect(await own.text()).toBe(SECRET_VALUE);
  });

  it("acts on its own conversation, never on another one of the sandbox", async () => {
    const policy = (id: string) =>
      as(first.sessionKey, agent(`/api/conversations/${id}/confirmation_policy`), {
        method: "POST",
        json: { policy: { kind: "AlwaysConfirm" } },
      });
    expect((await policy(first.id)).status).toBe(200);
    const other = await policy(second.id);
    expect(other.status).toBe(404);
    // The other conversation's policy is as it was (the sandbox's key reads it).
    const info = (await (await as(sandbox.key, agent(`/api/conversations/${second.id}`))).json()) as {
      confirmation_policy: { kind: string };
    };
    expect(info.confirmation_policy.kind).not.toBe("AlwaysConfirm");
    expect((await as(first.sessionKey, agent(`/api/conversations/${second.id}`))).status).toBe(404);
    const listed = (await (await as(first.sessionKey, agent("/api/conversations/search"))).json()) as {
      items: { id: string }[];
    };
    expect(listed.items.map((c) => c.id.replaceAll("-", ""))).toEqual([first.id]);
    // The sandbox's own key lists both.
    const all = (await (await as(sandbox.key, agent("/api/conversations/search"))).json()) as { items: unknown[] };
    expect(all.items).toHaveLength(2);
  });

  it("starts no conversation (on the operator's LLM key or any); the sandbox's key may", async () => {
    const start = { agent: { kind: "Agent", llm: { model: "gpt-4o" } } };
    const refused = await as(first.sessionKey, agent("/api/conversations"), { method: "POST", json: start });
    expect(refused.status, await refused.clone().text()).toBe(403);
    // The sandbox's key gets past the key check to the request's own rules (no LLM is offered here: 422).
    const viaSandbox = await as(sandbox.key, agent("/api/conversations"), { method: "POST", json: start });
    expect([201, 422]).toContain(viaSandbox.status);
  });
});
