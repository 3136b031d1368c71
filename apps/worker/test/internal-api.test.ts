import { randomBytes } from "node:crypto";
import {
  ConflictError,
  createLogger,
  httpStatusOf,
  type Sandbox,
  ValidationError,
  type WorkerOp,
  workerApi,
  workerPath,
} from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { advertiseWorker, createRedis } from "@tern/queue";
import { callWorker, type WorkerReadDeps } from "@tern/services";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type TestDatabase,
  testRedisUrl,
  testSandboxDriver,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InternalServer, startInternalServer } from "../src/http/server.ts";

/**
 * The workers' internal API is a contract in @tern/core (worker-api.ts, error-statuses.ts): the
 * worker's server and the services' client read the same paths, schemas and error table, so a
 * worker's refusal reaches the API's client with the status the worker gave it.
 */
let database: TestDatabase;
let redis: Redis;
let server: InternalServer;
let deps: WorkerReadDeps;
const prefix = createRedisPrefix();
const token = randomBytes(16).toString("hex");

const sandboxWith = async (status: Sandbox["status"]): Promise<Sandbox> => {
  const fixture = await createConversationFixture(database.db);
  return sandboxesRepository(database.db).upsert({
    name: `internal-api-${fixture.conversationId}`,
    image: "test",
    startTaskId: fixture.taskId,
    conversationId: fixture.conversationId,
    status,
  });
};

beforeAll(async () => {
  database = await createTestDatabase();
  redis = createRedis(testRedisUrl(), "producer");
  await new Promise<void>((resolve, reject) => {
    redis.once("ready", resolve);
    redis.once("error", reject);
  });
  const logger = createLogger("internal-api-test", "silent");
  server = await startInternalServer(
    { db: database.db, redis, sandboxes: testSandboxDriver(), logger, token },
    { host: "127.0.0.1", port: 0 },
  );
  await advertiseWorker(
    redis,
    prefix,
    { workerId: "w1", url: `http://127.0.0.1:${server.port}`, engineId: null, startedAt: new Date().toISOString() },
    60_000,
  );
  deps = { db: database.db, redis, logger, workerAccess: { prefix, token } };
});

afterAll(async () => {
  await server?.close();
  await deleteRedisPrefix(prefix);
  redis?.disconnect();
  await database?.drop();
});

describe("the workers' internal API contract", () => {
  it("a query the contract refuses is the worker's validation_failed, which reaches the client as 422", async () => {
    const sandbox = await sandboxWith("RUNNING");
    // The typed client cannot ask this; a raw path stands for a client and server out of step.
    const path = workerPath("diff", { sandboxId: sandbox.id }, { format: "xml" as never });
    const raw = await fetch(`http://127.0.0.1:${server.port}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(raw.status).toBe(422);
    expect(await raw.json()).toMatchObject({ error: { code: "validation_failed" } });

    const err = await callWorker(deps, sandbox, "diff", { format: "xml" as never }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toMatch(/format/);
    expect(httpStatusOf[(err as ValidationError).code]).toBe(422);
  });

  it("a file read without its path is refused by the same schema", async () => {
    const sandbox = await sandboxWith("RUNNING");
    const err = await callWorker(deps, sandbox, "file", {} as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toBe("path: required");
  });

  it("a well-formed read of a paused sandbox is the worker's conflict, 409 at the client", async () => {
    const sandbox = await sandboxWith("PAUSED");
    const err = await callWorker(deps, sandbox, "file", { path: "PLAN.md" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(httpStatusOf[(err as ConflictError).code]).toBe(409);
  });

  it("serves every operation of the contract's table at its method and route", async () => {
    const sandbox = await sandboxWith("PAUSED");
    const unserved: string[] = [];
    for (const op of Object.keys(workerApi) as WorkerOp[]) {
      const { method, route } = workerApi[op];
      const path = route.replace(":sandboxId", sandbox.id).replace(":commandId", sandbox.id);
      const res = await fetch(`http://127.0.0.1:${server.port}${path}?path=/workspace/x`, {
        method,
        headers: { authorization: `Bearer ${token}` },
      });
      const body = (await res.json()) as { error?: { code?: string; message?: string } };
      // A served route reaches the sandbox's state (paused: a conflict), never the server's "Not found".
      if (res.status === 404 && body.error?.message === "Not found") unserved.push(`${op}: ${method} ${route}`);
    }
    expect(unserved).toEqual([]);
  });
});
