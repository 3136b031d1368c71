import { execFile, spawnSync } from "node:child_process";
import { DEFAULT_API_KEY_MAX_LIFETIME_DAYS } from "@tern/core";
import { createUserWithKey } from "@tern/services";
import {
  appEntry,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  freePort,
  repoRoot,
  type ServiceProcess,
  scaled,
  startService,
  type TestDatabase,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** The real API process (main.ts), as operators run it. */
let database: TestDatabase;
const prefix = createRedisPrefix();
const running: ServiceProcess[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await database?.drop();
  await deleteRedisPrefix(prefix);
});

const newKey = async () => {
  const made = await createUserWithKey(
    { db: database.db, maxKeyLifetimeDays: DEFAULT_API_KEY_MAX_LIFETIME_DAYS },
    { name: "process" },
  );
  return { key: made.key, id: made.apiKey.id, userId: made.userId };
};

/**
 * Runs the CLI without blocking this process: a blocked event loop would not see the API close an
 * idle keep-alive socket (after 5 s, a CLI start under load), and the next fetch would be written
 * to that dead socket ("other side closed").
 */
const cli = (args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [...appEntry("cli"), ...args],
      { cwd: repoRoot, env: { ...process.env, DATABASE_URL: database.url }, encoding: "utf8", timeout: scaled(60_000) },
      (err, stdout, stderr) =>
        resolve({ status: err ? (typeof err.code === "number" ? err.code : null) : 0, stdout, stderr }),
    );
  });

describe("the API process", () => {
  it("answers 503 and writes no task when Redis is unreachable", async () => {
    const deadRedis = `redis://127.0.0.1:${await freePort()}`;
    const api = await startService("api", { DATABASE_URL: database.url, REDIS_URL: deadRedis, REDIS_PREFIX: prefix });
    running.push(api);
    const { key, userId } = await newKey();
    const res = await fetch(`${api.url}/api/v1/app-conversations`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ title: "t", initial_message: { role: "user", content: [{ type: "text", text: "hi" }] } }),
    });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("service_unavailable");
    const rows = await database.db.selectFrom("start_tasks").select("id").where("user_id", "=", userId).execute();
    expect(rows).toEqual([]);
    // Reads do not need Redis.
    expect((await fetch(`${api.url}/api/keys`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
  });

  it("exits 78, naming the variable, when its configuration is invalid", () => {
    for (const app of ["api", "worker"] as const) {
      const run = spawnSync(process.execPath, appEntry(app), {
        cwd: repoRoot,
        env: { ...process.env, DATABASE_URL: database.url, REDIS_URL: "not a url" },
        encoding: "utf8",
        timeout: scaled(30_000),
      });
      expect(run.status, app).toBe(78);
      expect(run.stderr).toMatch(/^Invalid configuration: REDIS_URL: /);
    }
  });

  it("writes last_used_at of the keys it saw when it shuts down", async () => {
    const api = await startService("api", { DATABASE_URL: database.url, REDIS_PREFIX: prefix });
    const { key, id } = await newKey();
    expect((await fetch(`${api.url}/api/keys`, { headers: { "x-access-token": key } })).status).toBe(200);
    expect(await api.stop()).toBe(0);
    const row = await database.db.selectFrom("api_keys").select("last_used_at").where("id", "=", id).executeTakeFirst();
    expect(row?.last_used_at).toMatch(/Z$/);
  });
});

describe("cli keys create", () => {
  it("prints only the new key, which authenticates against the API (and --admin opens bull-board)", async () => {
    const api = await startService("api", { DATABASE_URL: database.url, REDIS_PREFIX: prefix });
    running.push(api);
    const made = await cli(["keys", "create", "--name", "laptop"]);
    expect(made.status, made.stderr).toBe(0);
    expect(made.stdout).toMatch(/^oh_[A-Za-z0-9_-]+\n$/);
    const key = made.stdout.trim();
    const list = await fetch(`${api.url}/api/keys`, { headers: { authorization: `Bearer ${key}` } });
    expect(list.status).toBe(200);
    expect(((await list.json()) as { name: string }[]).map((k) => k.name)).toEqual(["laptop"]);
    expect((await fetch(`${api.url}/admin/queues`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(403);

    const admin = (await cli(["keys", "create", "--name", "ops", "--admin"])).stdout.trim();
    expect((await fetch(`${api.url}/admin/queues`, { headers: { authorization: `Bearer ${admin}` } })).status).toBe(
      200,
    );
    // --if-none prints nothing once any user exists.
    const again = await cli(["keys", "create", "--name", "x", "--if-none"]);
    expect(again.status).toBe(0);
    expect(again.stdout).toBe("");
  });
});
