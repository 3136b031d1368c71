import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import {
  createRedisPrefix,
  createTestDatabase,
  freePort,
  type ServiceProcess,
  startService,
  type TestDatabase,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A Redis of this test's own, so stopping it disturbs nobody else.
const startRedis = async (port: number): Promise<ChildProcess> => {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  for (let i = 0; i < 200 && !/Ready to accept connections/.test(out); i++) await new Promise((r) => setTimeout(r, 25));
  return child;
};

const stopRedis = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGKILL");
  await once(child, "exit");
};

const readyStatus = async (url: string) => {
  const res = await fetch(`${url}/ready`);
  return { status: res.status, body: (await res.json()) as { error?: { message: string } } };
};

const eventually = async <T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
};

let database: TestDatabase;
let api: ServiceProcess | undefined;
let redis: ChildProcess | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await api?.stop();
  if (redis) await stopRedis(redis);
  await database.drop();
});

describe("readiness follows Redis", () => {
  it("turns 503 naming Redis when it stops, and 200 again when it is back, without a restart", async () => {
    const port = await freePort();
    redis = await startRedis(port);
    api = await startService("api", {
      DATABASE_URL: database.url,
      REDIS_URL: `redis://127.0.0.1:${port}`,
      REDIS_PREFIX: createRedisPrefix(),
    });
    expect((await readyStatus(api.url)).status).toBe(200);

    await stopRedis(redis);
    const down = await eventually(
      () => readyStatus(api!.url),
      (r) => r.status === 503,
    );
    expect(down.status).toBe(503);
    expect(down.body.error?.message).toMatch(/redis/);

    redis = await startRedis(port);
    const up = await eventually(
      () => readyStatus(api!.url),
      (r) => r.status === 200,
    );
    expect(up.status).toBe(200);
    expect((await fetch(`${api.url}/health`)).status).toBe(200);
  });
});
