import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  createLogger,
  createSecretBox,
  generateSecretsKey,
  MAX_SECRETS_PER_USER,
  parseSecretsKeys,
  toHexId,
} from "@tern/core";
import { agentSecretEnv, userMcpConfigForRun, userSecretContext } from "@tern/services";
import { appEntry, createConversationFixture, repoRoot, scaled, testSecretsKey } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * Secrets: sealed at rest, write-only, scoped to their user, and never in a response, a
 * log line, an error detail, a stored request or a queued job. A canary value is grepped for in all.
 */
let api: TestApi;
let app: ReturnType<typeof createApp>;
const logLines: string[] = [];

beforeAll(async () => {
  api = await startTestApi();
  // The same API on the same resources, logging everything (trace) where the test can read it.
  const logger = createLogger("api-canary", "trace", { write: (line: string) => void logLines.push(line) });
  app = createApp({
    config: api.config,
    db: api.database.db,
    redis: api.redis,
    queues: api.queues,
    logger,
    secretBox: api.secretBox,
    keyUsage: api.keyUsage,
    sandboxEvents: api.sandboxEvents,
    workerAccess: api.workerAccess,
    rateLimiter: null,
  });
});
afterAll(async () => api?.close());

const CANARY = `canary-${randomUUID()}`;
const box = () => ({ db: api.database.db, secretBox: api.secretBox });
const responses: string[] = [];

/** A request through the logging app; every answer's text is kept for the canary grep. */
const call = async (key: string, path: string, init: { method?: string; json?: unknown } = {}) => {
  const res = await app.request(path, {
    method: init.method ?? "GET",
    headers: {
      authorization: `Bearer ${key}`,
      ...(init.json !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  responses.push(text);
  return { status: res.status, body: text ? JSON.parse(text) : null };
};

describe("secrets", () => {
  it("round-trip: created sealed, listed without values, changed, deleted", async () => {
    const { key, userId } = await api.newUser();
    const created = await call(key, "/api/v1/secrets", {
      method: "POST",
      json: { name: "NPM_TOKEN", value: CANARY, description: "publishes" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "NPM_TOKEN", description: "publishes" });
    expect(created.body).not.toHaveProperty("value");

    const row = await api.database.db
      .selectFrom("user_secrets")
      .selectAll()
      .where("user_id", "=", userId)
      .executeTakeFirstOrThrow();
    expect(row.value).not.toContain(CANARY);
    expect(row.value.split(".")[1]).toBe(api.secretBox.keyId);
    expect(api.secretBox.open(row.value, userSecretContext(userId, "NPM_TOKEN"))).toBe(CANARY);
    // Bound to its user and name: the same sealed value does not open as another's.
    expect(() => api.secretBox.open(row.value, userSecretContext(userId, "OTHER"))).toThrow();

    const list = await call(key, "/api/v1/secrets");
    expect(list.body).toEqual({
      custom_secrets: [
        { name: "NPM_TOKEN", description: "publishes", created_at: expect.any(String), updated_at: expect.any(String) },
      ],
    });

    const changed = await call(key, "/api/v1/secrets/NPM_TOKEN", {
      method: "PUT",
      json: { value: `${CANARY}-2`, description: null },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.description).toBeNull();
    expect(await agentSecretEnv(box(), { userId, startTaskId: null })).toEqual({ NPM_TOKEN: `${CANARY}-2` });

    expect((await call(key, "/api/v1/secrets/NPM_TOKEN", { method: "DELETE" })).body).toEqual({
      name: "NPM_TOKEN",
      deleted: true,
    });
    expect((await call(key, "/api/v1/secrets/NPM_TOKEN", { method: "DELETE" })).status).toBe(404);
    expect((await call(key, "/api/v1/secrets")).body).toEqual({ custom_secrets: [] });
  });

  it("another user's secret is 404, and their list never shows it", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    await call(alice.key, "/api/v1/secrets", { method: "POST", json: { name: "ALICE_ONLY", value: CANARY } });
    expect(
      (await call(bob.key, "/api/v1/secrets/ALICE_ONLY", { method: "PUT", json: { value: "x1234" } })).status,
    ).toBe(404);
    expect((await call(bob.key, "/api/v1/secrets/ALICE_ONLY", { method: "DELETE" })).status).toBe(404);
    expect((await call(bob.key, "/api/v1/secrets")).body).toEqual({ custom_secrets: [] });
    // A name no secret can have (a NUL byte, which Postgres refuses) names none: 404, not 500.
    expect((await call(bob.key, "/api/v1/secrets/%08%00x", { method: "DELETE" })).status).toBe(404);
    expect((await call(bob.key, "/api/v1/secrets/%00", { method: "PUT", json: { value: "x1234" } })).status).toBe(404);
    // Bob may have his own of that name.
    expect(
      (await call(bob.key, "/api/v1/secrets", { method: "POST", json: { name: "ALICE_ONLY", value: "bob1" } })).status,
    ).toBe(201);
    expect(await agentSecretEnv(box(), { userId: alice.userId, startTaskId: null })).toEqual({ ALICE_ONLY: CANARY });
  });

  it("refuses a duplicate name (409), a value over 64 KiB, a bad name and a 101st secret (422)", async () => {
    const { key } = await api.newUser();
    const post = (json: unknown) => call(key, "/api/v1/secrets", { method: "POST", json });
    expect((await post({ name: "DUP", value: CANARY })).status).toBe(201);
    const dup = await post({ name: "DUP", value: CANARY });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe("conflict");
    const big = await post({ name: "BIG", value: "x".repeat(64 * 1024 + 1) });
    expect(big.status).toBe(422);
    expect(big.body.detail).toMatch(/value: at most 65536 bytes/);
    expect((await post({ name: "BIG", value: "x".repeat(64 * 1024) })).status).toBe(201);
    for (const name of ["1ABC", "A-B", "TERN_STATE", ""])
      expect((await post({ name, value: "abcd" })).status).toBe(422);
    expect(
      (await call(key, "/api/v1/secrets/DUP", { method: "PUT", json: { value: "y".repeat(70_000) } })).status,
    ).toBe(422);

    for (let i = 2; i < MAX_SECRETS_PER_USER; i++) await post({ name: `S${i}`, value: "abcd" });
    expect((await call(key, "/api/v1/secrets")).body.custom_secrets).toHaveLength(MAX_SECRETS_PER_USER);
    const over = await post({ name: "ONE_TOO_MANY", value: "abcd" });
    expect(over.status).toBe(422);
    expect(over.body.detail).toMatch(/at most 100 secrets/);
  });
});

describe("a user's message", () => {
  it("is stored with the secret values masked as <secret:NAME>", async () => {
    const { key, userId } = await api.newUser();
    await call(key, "/api/v1/secrets", { method: "POST", json: { name: "DEPLOY_KEY", value: CANARY } });
    const conv = await createConversationFixture(api.database.db, { userId });
    const sent = await call(key, `/api/v1/conversation/${conv.conversationId}/events`, {
      method: "POST",
      json: { role: "user", content: [{ type: "text", text: `use ${CANARY} to deploy` }], run: false },
    });
    expect(sent.status).toBeLessThan(300);
    const found = await call(key, `/api/v1/conversation/${conv.conversationId}/events/search?kind__eq=MessageEvent`);
    const text = JSON.stringify(found.body.items);
    expect(text).toContain("use <secret:DEPLOY_KEY> to deploy");
  });
});

describe("the start request's secrets", () => {
  it("are stored sealed, echoed masked, merged over the user's (the request's win), and never queued", async () => {
    const { key, userId } = await api.newUser();
    await call(key, "/api/v1/secrets", { method: "POST", json: { name: "SHARED", value: "user-value" } });
    await call(key, "/api/v1/secrets", { method: "POST", json: { name: "USER_ONLY", value: "user-only" } });
    const res = await call(key, "/api/v1/app-conversations", {
      method: "POST",
      json: {
        initial_message: { role: "user", content: [{ type: "text", text: "hi" }] },
        secrets: { SHARED: CANARY, REQ_ONLY: `${CANARY}-req` },
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.request.secrets).toEqual({ SHARED: "**********", REQ_ONLY: "**********" });
    const taskId = res.body.id as string;
    const task = await api.database.db
      .selectFrom("start_tasks")
      .select(["id", "request"])
      .where("user_id", "=", userId)
      .executeTakeFirstOrThrow();
    expect(toHexId(task.id)).toBe(taskId);
    expect(JSON.stringify(task.request)).not.toContain(CANARY);
    const sealed = await api.database.db
      .selectFrom("start_task_secrets")
      .selectAll()
      .where("start_task_id", "=", task.id)
      .execute();
    expect(sealed.map((s) => s.name).sort()).toEqual(["REQ_ONLY", "SHARED"]);
    expect(JSON.stringify(sealed)).not.toContain(CANARY);

    // The batch read echoes the same masked request.
    const again = await call(key, `/api/v1/app-conversations/start-tasks?ids=${taskId}`);
    expect(again.body[0].request.secrets).toEqual({ SHARED: "**********", REQ_ONLY: "**********" });

    expect(await agentSecretEnv(box(), { userId, startTaskId: task.id })).toEqual({
      SHARED: CANARY,
      USER_ONLY: "user-only",
      REQ_ONLY: `${CANARY}-req`,
    });

    // bull-board shows job payloads: nothing secret in any queued job.
    const jobs = await Promise.all(
      api.queues.all.map((q) => q.getJobs(["waiting", "delayed", "active", "completed", "failed"])),
    );
    const payloads = JSON.stringify(jobs.flat().map((j) => ({ data: j?.data, name: j?.name })));
    expect(payloads).toContain(task.id);
    expect(payloads).not.toContain(CANARY);

    // A message queued for the task before READY is stored masked too.
    const pending = await call(key, `/api/v1/conversations/task-${taskId}/pending-messages`, {
      method: "POST",
      json: { content: [{ type: "text", text: `token ${CANARY}-req here` }] },
    });
    expect(pending.status).toBe(201);
    const queued = await api.database.db
      .selectFrom("pending_messages")
      .select("content")
      .where("start_task_id", "=", task.id)
      .execute();
    expect(JSON.stringify(queued)).toContain("<secret:REQ_ONLY>");
    expect(JSON.stringify(queued)).not.toContain(CANARY);
  });

  it("are validated like the user's: a bad name or an oversized value is 422 naming the field", async () => {
    const { key } = await api.newUser();
    const bad = await call(key, "/api/v1/app-conversations", {
      method: "POST",
      json: { secrets: { "not a name": CANARY } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toMatch(/secrets/);
    const big = await call(key, "/api/v1/app-conversations", {
      method: "POST",
      json: { secrets: { BIG: "x".repeat(64 * 1024 + 1) } },
    });
    expect(big.status).toBe(422);
  });
});

describe("cli secrets rotate-key", () => {
  it("seals every value again under the new first key; they open without the old key afterwards", async () => {
    const { key, userId } = await api.newUser();
    await call(key, "/api/v1/secrets", { method: "POST", json: { name: "ROTATED", value: CANARY } });
    await call(key, "/api/v1/settings", { method: "POST", json: { llm_api_key: `${CANARY}-llm` } });
    const mcpConfig = { mcpServers: { py: { command: "python3", args: ["s.py"], env: { TOKEN: `${CANARY}-mcp` } } } };
    await call(key, "/api/v1/settings", { method: "POST", json: { mcp_config: mcpConfig } });
    const newKey = generateSecretsKey();
    const cli = (secretsKey: string) =>
      spawnSync(process.execPath, [...appEntry("cli"), "secrets", "rotate-key"], {
        cwd: repoRoot,
        env: { ...process.env, DATABASE_URL: api.database.url, SECRETS_KEY: secretsKey },
        encoding: "utf8",
        timeout: scaled(60_000),
      });
    const res = cli(`${newKey},${testSecretsKey}`);
    expect(res.status, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^resealed \d+, already under key \w+ 0, unreadable 0\n$/);
    expect(res.stdout).not.toContain(CANARY);

    const onlyNew = createSecretBox(parseSecretsKeys(newKey));
    expect(await agentSecretEnv({ db: api.database.db, secretBox: onlyNew }, { userId, startTaskId: null })).toEqual({
      ROTATED: CANARY,
    });
    const settings = await api.database.db
      .selectFrom("user_settings")
      .selectAll()
      .where("user_id", "=", userId)
      .executeTakeFirstOrThrow();
    expect(settings.llm_api_key?.split(".")[1]).toBe(onlyNew.keyId);
    expect(settings.mcp_config_sealed?.split(".")[1]).toBe(onlyNew.keyId);
    expect(await userMcpConfigForRun({ db: api.database.db, secretBox: onlyNew }, userId)).toEqual(mcpConfig);
    // A second run has nothing left to do.
    expect(cli(`${newKey},${testSecretsKey}`).stdout).toMatch(/^resealed 0, /);
    // Without the old key nothing of the old values would open: the CLI says so and fails.
    const other = cli(generateSecretsKey());
    expect(other.status).toBe(1);
    expect(other.stdout).toMatch(/unreadable [1-9]/);
  });
});

describe("the canary", () => {
  it("never appears in a response, a log line or an error detail", () => {
    expect(responses.length).toBeGreaterThan(10);
    for (const text of responses) expect(text).not.toContain(CANARY);
    expect(logLines.length).toBeGreaterThan(10);
    for (const line of logLines) expect(line).not.toContain(CANARY);
  });
});
