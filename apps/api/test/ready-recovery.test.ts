import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import {
  createRedisPrefix,
  createTestDatabase,
  freePort,
  type ServiceProcess,
  startService,
  type TestDatabase,
  waitFor,
} from "@tern/testing";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** Whether a Redis answers PING on `port` (one attempt, no retries). */
const answers = async (port: number): Promise<boolean> => {
  const client = new Redis(port, "127.0.0.1", {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
};

// A Redis of this test's own, so stopping it disturbs nobody else.
const startRedis = async (port: number): Promise<ChildProcess> => {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: "ignore" },
  );
  await waitFor(() => answers(port), { what: `redis-server on port ${port} to answer PING`, timeoutMs: 5_000 });
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

/** Polls /ready until its status is `status`; returns that answer. */
const readyWhen = (url: string, status: number) =>
  waitFor(
    async () => {
      const r = await readyStatus(url);
      return r.status === status && r;
    },
    { what: `/ready to answer ${status}`, timeoutMs: 15_000, intervalMs: 100 },
  );

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
    const down = await readyWhen(api.url, 503);
    expect(down.status).toBe(503);
    expect(down.body.error?.message).toMatch(/redis/);

    redis = await startRedis(port);
    const up = await readyWhen(api.url, 200);
    expect(up.status).toBe(200);
    expect((await fetch(`${api.url}/health`)).status).toBe(200);
  });
});
