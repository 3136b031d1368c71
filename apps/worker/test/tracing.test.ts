import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { createLogger, startTracing, type TracingHandle } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import { traceSandboxDriver } from "@tern/sandbox";
import {
  prepareTestSandboxes,
  removeSandboxesOfNamespace,
  testRedisUrl,
  testSandboxDriver,
  testSandboxNetworkName,
  testSecretBox,
  waitFor,
} from "@tern/testing";
import type { Worker } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "../../api/test/harness.ts";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import { startWorkers } from "../src/workers.ts";
import { uuidOf } from "./start-harness.ts";

/**
 * One trace per start: the API's request span, the queue hop (the job's span is the request's
 * child, its context carried in the job's data), each stage a child of the job, and the sandbox
 * engine's calls children of the stage that made them. The API and a worker run in this process,
 * exporting to the SDK's in-memory exporter.
 */

const exporter = new InMemorySpanExporter();
let tracing: TracingHandle | null;
let api: TestApi;
let redis: Redis;
let deps: WorkerDeps;
let workers: Worker[];

beforeAll(async () => {
  tracing = await startTracing("tern-test", { exporter });
  api = await startTestApi();
  redis = createRedis(testRedisUrl(), "worker");
  const driver = testSandboxDriver();
  await prepareTestSandboxes(driver);
  const config = loadWorkerConfig({
    DATABASE_URL: api.database.url,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: api.prefix,
    SANDBOX_NETWORK: testSandboxNetworkName(),
    SANDBOX_POOL_SIZE: "0",
    SANDBOX_MEMORY_MB: "256",
  });
  deps = {
    config: { ...config, WORKER_ID: "traced" },
    db: api.database.db,
    redis,
    queues: createQueues(redis, api.prefix),
    sandboxes: traceSandboxDriver(driver),
    // One engine, and the test takes its jobs from the shared queues: no affinity here.
    engineId: null,
    pool: null,
    logger: createLogger("worker-test", "silent"),
    secretBox: testSecretBox(),
  };
  workers = startWorkers(deps);
});

afterAll(async () => {
  await Promise.all((workers ?? []).map((w) => w.close()));
  await deps?.queues.close();
  redis?.disconnect();
  if (api) await removeSandboxesOfNamespace(api.prefix);
  await api?.close();
  await tracing?.shutdown();
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe("tracing a start", () => {
  it("is one trace: request > job > each stage > the engine's calls", async () => {
    const { key } = await api.newUser();
    const res = await api.call("/api/v1/app-conversations", { method: "POST", key, json: {} });
    expect(res.status).toBe(200);
    const id = uuidOf(((await res.json()) as { id: string }).id);
    await waitFor(async () => (await startTasksRepository(api.database.db).get(id))?.status === "READY", {
      what: "the start to be READY",
    });
    const spans = await waitFor(
      () => {
        const all = exporter.getFinishedSpans();
        return all.some((s) => s.name === "job conversation.start") && all;
      },
      { what: "the job's span to end" },
    );

    const request = spans.find((s) => s.name === "POST /api/v1/app-conversations");
    expect(request, spans.map((s) => s.name).join(", ")).toBeDefined();
    const traceId = request!.spanContext().traceId;
    expect(request!.attributes["http.response.status_code"]).toBe(200);

    const job = spans.find((s) => s.name === "job conversation.start")!;
    expect(job.spanContext().traceId).toBe(traceId);
    expect(parentOf(job)).toBe(request!.spanContext().spanId);
    expect(job.attributes["messaging.destination.name"]).toBe("conversation-start");

    const stages = spans.filter((s) => s.name.startsWith("stage ") && s.spanContext().traceId === traceId);
    expect(stages.map((s) => s.name)).toEqual(
      expect.arrayContaining([
        "stage WAITING_FOR_SANDBOX",
        "stage PREPARING_REPOSITORY",
        "stage RUNNING_SETUP_SCRIPT",
        "stage SETTING_UP_GIT_HOOKS",
        "stage SETTING_UP_SKILLS",
        "stage STARTING_CONVERSATION",
      ]),
    );
    for (const s of stages) expect(parentOf(s), s.name).toBe(job.spanContext().spanId);

    const waiting = stages.find((s) => s.name === "stage WAITING_FOR_SANDBOX")!;
    const create = spans.find((s) => s.name === "sandbox.create" && s.spanContext().traceId === traceId);
    expect(create).toBeDefined();
    expect(parentOf(create!)).toBe(waiting.spanContext().spanId);
    const stageIds = new Set(stages.map((s) => s.spanContext().spanId));
    const execs = spans.filter((s) => s.name === "sandbox.exec" && s.spanContext().traceId === traceId);
    expect(execs.length).toBeGreaterThan(0);
    for (const e of execs) expect(stageIds.has(parentOf(e) ?? "")).toBe(true);
  });
});
