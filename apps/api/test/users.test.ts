import { spawnSync } from "node:child_process";
import { deploymentSecretsRepository } from "@tern/db";
import { resolveCursorSecret } from "@tern/services";
import { appEntry, createConversationFixture, repoRoot, scaled } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { ADMIN_COOKIE } from "../src/middleware/auth.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/** Users, and the sessions and secrets of the deployment. */
let api: TestApi;
beforeAll(async () => {
  api = await startTestApi({ env: { API_KEY_MAX_LIFETIME_DAYS: "30" } });
});
afterAll(async () => api?.close());

// biome-ignore lint/suspicious/noExplicitAny: the answers' JSON, read field by field
type Json = Record<string, any>;
const json = async (res: Response) => (await res.json()) as Json;
const DAY = 86_400_000;

describe("users", () => {
  it("an admin creates a user, with a first key shown once; the user reads itself at /users/me", async () => {
    const admin = await api.newUser({ admin: true });
    const res = await api.call("/api/v1/users", { key: admin.key, method: "POST", json: { name: "alice" } });
    expect(res.status).toBe(201);
    const created = await json(res);
    expect(created).toMatchObject({ name: "alice", is_admin: false, llm_model: null, llm_api_key_set: false });
    expect(created.id).toMatch(/^[0-9a-f]{32}$/);
    expect(created.key).toMatch(/^oh_/);

    const me = await json(await api.call("/api/v1/users/me", { key: created.key }));
    expect(me).toEqual({
      id: created.id,
      name: "alice",
      is_admin: false,
      created_at: expect.stringMatching(/Z$/),
      llm_model: null,
      llm_base_url: null,
      llm_api_key_set: false,
      max_iterations: null,
      max_budget_per_task: null,
      llm_extended_thinking_budget: null,
      llm_reasoning_effort: null,
      confirmation_mode: false,
      security_analyzer: "llm",
      mcp_config: null,
    });
    // The new user's keys are their own: the admin's list does not show them.
    const adminKeys = (await json(await api.call("/api/keys", { key: admin.key }))) as unknown as Json[];
    expect(adminKeys.map((k) => k.id)).not.toContain(created.key_id);
  });

  it("only admin keys create users (403), and none without a key (401); input is validated (422)", async () => {
    const user = await api.newUser();
    const refused = await api.call("/api/v1/users", { key: user.key, method: "POST", json: {} });
    expect(refused.status).toBe(403);
    expect((await json(refused)).error.code).toBe("forbidden");
    expect((await api.call("/api/v1/users", { method: "POST", json: {} })).status).toBe(401);
    const admin = await api.newUser({ admin: true });
    expect(
      (await api.call("/api/v1/users", { key: admin.key, method: "POST", json: { is_admin: "yes" } })).status,
    ).toBe(422);
    const op = await api.call("/api/v1/users", { key: admin.key, method: "POST", json: { is_admin: true } });
    expect((await json(op)).is_admin).toBe(true);
  });

  it("cli users create prints the id; keys create --user prints a key of that user", async () => {
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [...appEntry("cli"), ...args], {
        cwd: repoRoot,
        env: { ...process.env, DATABASE_URL: api.database.url },
        encoding: "utf8",
        timeout: scaled(30_000),
      });
    const made = cli("users", "create", "--name", "bob");
    expect(made.status, made.stderr).toBe(0);
    expect(made.stdout).toMatch(/^[0-9a-f-]{36}\n$/);
    const userId = made.stdout.trim();
    const key = cli("keys", "create", "--user", userId, "--name", "laptop");
    expect(key.status, key.stderr).toBe(0);
    expect(key.stdout).toMatch(/^oh_\S+\n$/);
    // In process: the spawns above held this process's event loop, and its idle HTTP connections with it.
    const me = await json(
      await api.app.request("/api/v1/users/me", { headers: { authorization: `Bearer ${key.stdout.trim()}` } }),
    );
    expect(me).toMatchObject({ id: userId.replaceAll("-", ""), name: "bob", is_admin: false });
    const unknown = cli("keys", "create", "--user", "00000000-0000-4000-8000-000000000000");
    expect(unknown.status).toBe(64);
    expect(unknown.stderr).toMatch(/--user: no user/);
    expect(cli("keys", "create", "--user", userId, "--admin").status).toBe(64);
  });
});

describe("key lifetime", () => {
  it("a key asked for without expires_at expires at API_KEY_MAX_LIFETIME_DAYS", async () => {
    const { key } = await api.newUser();
    const created = await json(await api.call("/api/keys", { key, method: "POST", json: {} }));
    const expires = Date.parse(created.expires_at);
    expect(expires).toBeGreaterThan(Date.now() + 29 * DAY);
    expect(expires).toBeLessThanOrEqual(Date.now() + 30 * DAY);
  });
});

describe("the cursor secret", () => {
  it("is random, generated once and kept: not derived from DATABASE_URL", async () => {
    const first = await resolveCursorSecret(api.database.db, undefined);
    expect(first).not.toContain(api.database.url);
    expect(first.length).toBeGreaterThanOrEqual(32);
    expect(await resolveCursorSecret(api.database.db, undefined)).toBe(first);
    expect(await deploymentSecretsRepository(api.database.db).getOrCreate("cursor_secret", () => "other")).toBe(first);
    expect(await resolveCursorSecret(api.database.db, "configured-secret-0123456789")).toBe(
      "configured-secret-0123456789",
    );
  });
});

describe("session keys", () => {
  it("are stored as a hash and sealed, never in plaintext, shown to their owner, and revoked on DELETE", async () => {
    const owner = await api.newUser();
    const conv = await createConversationFixture(api.database.db, { userId: owner.userId });
    const read = () =>
      fetch(`${api.url}/api/v1/app-conversations?ids=${conv.conversationId}`, {
        headers: { "x-session-api-key": conv.sessionApiKey },
      });
    const first = await read();
    expect(first.status).toBe(200);
    // The record still carries the key, as OpenHands' does: opened from its sealed form.
    expect(((await first.json()) as { session_api_key: string }[])[0]?.session_api_key).toBe(conv.sessionApiKey);
    // Nowhere in the row is the key itself: a database reader learns nothing that authenticates.
    const stored = async () =>
      (
        await sql<{
          row: string;
        }>`select row_to_json(c)::text as row from conversations c where id = ${conv.conversationId}`.execute(
          api.database.db,
        )
      ).rows[0]?.row ?? "";
    expect(await stored()).toMatch(/"session_api_key_hash":"[0-9a-f]{64}"/);
    expect(await stored()).not.toContain(conv.sessionApiKey);
    const deleted = await api.call(`/api/v1/app-conversations/${conv.conversationId}`, {
      key: owner.key,
      method: "DELETE",
    });
    expect(deleted.status).toBe(200);
    expect((await read()).status).toBe(401);
    expect(await stored()).toMatch(/"session_api_key_sealed":null/);
  });
});

describe("/ready", () => {
  // A Redis that fails the way a real outage does, naming an internal address.
  const brokenRedis = {
    ...api,
    config: () => Promise.reject(new Error("connect ECONNREFUSED 10.11.12.13:6379")),
    ping: () => Promise.reject(new Error("connect ECONNREFUSED 10.11.12.13:6379")),
  };
  const appWithBrokenRedis = () =>
    createApp({
      config: api.config,
      db: api.database.db,
      redis: { ...brokenRedis, status: "ready" } as never,
      queues: api.queues,
      logger: api.logger,
      secretBox: api.secretBox,
      keyUsage: api.keyUsage,
      sandboxEvents: api.sandboxEvents,
      workerAccess: api.workerAccess,
      rateLimiter: null,
    });

  it("names what is not ready to anyone, and shows why (the error's text) only to an admin key", async () => {
    const app = appWithBrokenRedis();
    const anonymous = await app.request("/ready");
    expect(anonymous.status).toBe(503);
    const text = await anonymous.text();
    expect(text).toMatch(/redis unreachable/);
    expect(text).not.toMatch(/10\.11\.12\.13|ECONNREFUSED/);
    const user = await api.newUser();
    const asUser = await app.request("/ready", { headers: { authorization: `Bearer ${user.key}` } });
    expect(await asUser.text()).not.toMatch(/ECONNREFUSED/);
    const admin = await api.newUser({ admin: true });
    const asAdmin = await app.request("/ready", { headers: { authorization: `Bearer ${admin.key}` } });
    expect(asAdmin.status).toBe(503);
    expect(await asAdmin.text()).toMatch(/ECONNREFUSED 10\.11\.12\.13/);
  });
});

describe("bull-board's session", () => {
  it("is a random session id in the cookie, never the admin key; Secure over https", async () => {
    const admin = await api.newUser({ admin: true });
    const login = await fetch(`${api.url}/admin/queues?token=${encodeURIComponent(admin.key)}`, { redirect: "manual" });
    expect(login.status).toBe(302);
    const setCookie = login.headers.get("set-cookie") ?? "";
    expect(setCookie.startsWith(`${ADMIN_COOKIE}=`)).toBe(true);
    expect(setCookie).not.toContain(admin.key);
    expect(setCookie).not.toContain(encodeURIComponent(admin.key));
    expect(setCookie).toMatch(/Max-Age=900/);
    // Only its hash is in Redis.
    const sessionId = setCookie.split(";")[0]?.split("=")[1] ?? "";
    const stored = await api.redis.keys(`${api.prefix}:admin-session:*`);
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.join()).not.toContain(sessionId);

    const https = createApp({
      config: { ...api.config, publicUrl: "https://tern.example" },
      db: api.database.db,
      redis: api.redis,
      queues: api.queues,
      logger: api.logger,
      secretBox: api.secretBox,
      keyUsage: api.keyUsage,
      sandboxEvents: api.sandboxEvents,
      workerAccess: api.workerAccess,
      rateLimiter: null,
    });
    const secure = await https.request(`/admin/queues?token=${encodeURIComponent(admin.key)}`);
    expect(secure.headers.get("set-cookie")).toMatch(/;\s*Secure/i);
  });

  it("refuses the dashboard's actions from another Origin (or none), and ends when the key is revoked", async () => {
    const admin = await api.newUser({ admin: true });
    const login = await fetch(`${api.url}/admin/queues?token=${encodeURIComponent(admin.key)}`, { redirect: "manual" });
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const queue = api.queues.all[0]?.name ?? "";
    const action = (origin?: string) =>
      fetch(`${api.url}/admin/queues/api/queues/${encodeURIComponent(queue)}/pause`, {
        method: "PUT",
        headers: { cookie, ...(origin ? { origin } : {}) },
      });
    expect((await action()).status).toBe(403);
    expect((await action("https://evil.example")).status).toBe(403);
    const own = await action(api.url);
    expect(own.status).not.toBe(403);
    expect(own.status).not.toBe(401);
    await api.queues.all[0]?.resume();
    // Reads need no Origin.
    expect((await fetch(`${api.url}/admin/queues/api/queues`, { headers: { cookie } })).status).toBe(200);

    const keys = (await json(await api.call("/api/keys", { key: admin.key }))) as unknown as Json[];
    for (const k of keys) await api.call(`/api/keys/${k.id}`, { key: admin.key, method: "DELETE" });
    expect((await fetch(`${api.url}/admin/queues/api/queues`, { headers: { cookie } })).status).toBe(401);
  });
});
