import { spawnSync } from "node:child_process";
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

let database: TestDatabase;
const prefix = createRedisPrefix();
const running: ServiceProcess[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await database.drop();
  await deleteRedisPrefix(prefix);
});

describe("liveness and readiness", () => {
  it("is live and ready when Postgres and Redis answer", async () => {
    const api = await startService("api", { DATABASE_URL: database.url, REDIS_PREFIX: prefix });
    running.push(api);
    expect((await fetch(`${api.url}/health`)).status).toBe(200);
    const ready = await fetch(`${api.url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: { postgres: "ok", redis: "ok" } });
  });

  it("is live but not ready, naming Redis, when Redis does not answer", async () => {
    const deadRedis = `redis://127.0.0.1:${await freePort()}`;
    const api = await startService("api", { DATABASE_URL: database.url, REDIS_URL: deadRedis, REDIS_PREFIX: prefix });
    running.push(api);
    expect((await fetch(`${api.url}/health`)).status).toBe(200);
    const ready = await fetch(`${api.url}/ready`);
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("service_unavailable");
    expect(body.error.message).toMatch(/redis/);
    expect(body.error.message).not.toMatch(/postgres/);
  });

  it("stops at once, naming the variable, when DATABASE_URL is nonsense", () => {
    const res = spawnSync(process.execPath, appEntry("api"), {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: "nonsense" },
      encoding: "utf8",
      timeout: scaled(20_000),
    });
    expect(res.status).not.toBe(0);
    expect(res.stderr).toMatch(/DATABASE_URL/);
  });
});
