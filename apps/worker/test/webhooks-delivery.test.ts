import { createLogger, newEvent, toHexId, type WebhookEventType } from "@tern/core";
import { eventsRepository, usersRepository, webhooksRepository } from "@tern/db";
import { createQueues, createRedis, QueueName } from "@tern/queue";
import { registerWebhook } from "@tern/services";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type TestDatabase,
  testRedisUrl,
  testSandboxDriver,
  testSecretBox,
  userMessageDraft,
  waitFor,
} from "@tern/testing";
import { Worker } from "bullmq";
import type { Redis } from "ioredis";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import { nextTryAt, startWebhookOutboxSweep, webhookDeliverProcessor } from "../src/processors/webhooks.ts";
import { signatureHeaders, startReceiver } from "./webhooks-receiver.ts";

let database: TestDatabase;
let redis: Redis;
const secretBox = testSecretBox();
const logger = createLogger("webhooks-test", process.env.TEST_LOG_LEVEL ?? "silent");
const perTest: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  redis = createRedis(testRedisUrl(), "worker");
});
afterEach(async () => {
  for (const c of perTest.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(async () => {
  redis?.disconnect();
  await database?.drop();
});

/**
 * An in-process dispatcher: the webhook queue's worker and the outbox sweep, with `env` settings.
 * The tests share one database, so each test's dispatcher is stopped when it ends (afterEach): an
 * earlier one, with other settings, would otherwise deliver the next test's outbox rows too.
 */
const startDispatcher = async (env: Record<string, string> = {}) => {
  const prefix = createRedisPrefix();
  const queues = createQueues(redis, prefix);
  const config = loadWorkerConfig({
    DATABASE_URL: database.url,
    REDIS_PREFIX: prefix,
    WEBHOOK_ALLOW_PRIVATE: "true",
    WEBHOOK_ALLOW_HTTP: "true",
    WEBHOOK_SWEEP_INTERVAL_MS: "100",
    WEBHOOK_TIMEOUT_MS: "2000",
    ...env,
  });
  const deps: WorkerDeps = {
    config,
    db: database.db,
    redis,
    queues,
    sandboxes: testSandboxDriver(),
    engineId: null,
    pool: null,
    logger,
    secretBox,
  };
  const worker = new Worker(QueueName.Webhook, webhookDeliverProcessor(deps), {
    connection: redis,
    prefix,
    concurrency: 8,
  });
  const sweep = startWebhookOutboxSweep(deps);
  const stop = async () => {
    await sweep.stop();
    await worker.close();
    await queues.close();
    await deleteRedisPrefix(prefix);
  };
  perTest.push(stop);
  return { deps, stop };
};

const openPolicy = { allowPrivate: true, allowHttp: true };

const newSubscriber = async (url: string, events: WebhookEventType[]) => {
  const user = await usersRepository(database.db).create();
  const { webhook, secret } = await registerWebhook({ db: database.db, secretBox, policy: openPolicy }, user.id, {
    url,
    events,
  });
  return { userId: user.id, webhook, secret };
};

const deliveriesOf = (webhookId: string) => webhooksRepository(database.db).listDeliveries(webhookId, { limit: 100 });

describe("webhook delivery", () => {
  it("delivers each subscribed change, signed so that the package's own verifier accepts it", async () => {
    const receiver = await startReceiver();
    perTest.push(receiver.close);
    await startDispatcher();
    const { userId, webhook, secret } = await newSubscriber(receiver.url, [
      "conversation.event",
      "conversation.execution_status",
    ]);
    const fx = await createConversationFixture(database.db, { userId });
    const [event] = await eventsRepository(database.db).append(fx.conversationId, [
      newEvent.executionStatus("running"),
    ]);

    await waitFor(() => receiver.received.length >= 2, { what: "two deliveries" });
    const verifier = new Webhook(secret);
    const messages = receiver.received.map(
      (r) => verifier.verify(r.body, signatureHeaders(r)) as { type: string; timestamp: string; data: never },
    );
    expect(messages.map((m) => m.type).sort()).toEqual(["conversation.event", "conversation.execution_status"]);
    const status = messages.find((m) => m.type === "conversation.execution_status");
    expect(status?.data).toMatchObject({
      conversation_id: toHexId(fx.conversationId),
      execution_status: "running",
      event_id: event?.id,
    });
    // A tampered body or another secret is refused by the same verifier.
    const first = receiver.received[0]!;
    expect(() => verifier.verify(`${first.body} `, signatureHeaders(first))).toThrow();
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 1).toString("base64")}`).verify(first.body, signatureHeaders(first)),
    ).toThrow();

    await waitFor(async () => (await deliveriesOf(webhook.id)).every((d) => d.status === "delivered"), {
      what: "both deliveries recorded as delivered",
    });
    for (const d of await deliveriesOf(webhook.id)) {
      expect(d.attemptList).toHaveLength(1);
      expect(d.attemptList[0]).toMatchObject({ attempt: 1, statusCode: 200, error: null });
    }
  });

  it("retries a receiver answering 500 with growing delays, under the same webhook-id, until it takes it", async () => {
    const receiver = await startReceiver((n) => (n <= 3 ? 500 : 204));
    perTest.push(receiver.close);
    await startDispatcher({ WEBHOOK_RETRY_BASE_MS: "200" });
    const { userId, webhook, secret } = await newSubscriber(receiver.url, ["conversation.event"]);
    const fx = await createConversationFixture(database.db, { userId });
    await eventsRepository(database.db).append(fx.conversationId, [userMessageDraft("retry me")]);

    const [delivery] = await waitFor(
      async () => {
        const list = await deliveriesOf(webhook.id);
        return list[0]?.status === "delivered" && list;
      },
      { what: "the delivery to succeed at its fourth try", timeoutMs: 20_000 },
    );
    expect(receiver.received).toHaveLength(4);
    expect(delivery?.attemptList.map((a) => a.statusCode)).toEqual([500, 500, 500, 204]);
    expect(delivery?.attemptList[0]?.error).toBe("HTTP 500: receiver is down");
    // Exponential backoff: about 200, 400, 800 ms between tries (never less, at most 10 % jitter plus a sweep).
    const gaps = receiver.received.slice(1).map((r, i) => r.at - (receiver.received[i]?.at ?? 0));
    expect(gaps[0]).toBeGreaterThanOrEqual(190);
    expect(gaps[1]).toBeGreaterThanOrEqual(390);
    expect(gaps[2]).toBeGreaterThanOrEqual(790);
    expect(gaps[2]).toBeGreaterThan(gaps[0]! * 2);
    const ids = new Set(receiver.received.map((r) => r.headers["webhook-id"]));
    expect(ids.size).toBe(1);
    for (const r of receiver.received)
      expect(() => new Webhook(secret).verify(r.body, signatureHeaders(r))).not.toThrow();
  });

  it("marks a delivery failed once its retry window is spent", async () => {
    const receiver = await startReceiver(() => 503);
    perTest.push(receiver.close);
    await startDispatcher({ WEBHOOK_RETRY_BASE_MS: "100", WEBHOOK_RETRY_WINDOW_MS: "1000" });
    const { userId, webhook } = await newSubscriber(receiver.url, ["start_task.status"]);
    await createConversationFixture(database.db, { userId });

    const list = await waitFor(
      async () => {
        const l = await deliveriesOf(webhook.id);
        return l.length === 2 && l.every((d) => d.status === "failed") && l;
      },
      { what: "both start task deliveries to fail for good", timeoutMs: 15_000 },
    );
    for (const d of list) {
      expect(d.attemptList.length).toBeGreaterThanOrEqual(3);
      expect(d.attemptList.every((a) => a.statusCode === 503)).toBe(true);
      const last = d.attemptList[d.attemptList.length - 1]!;
      // No try is scheduled past the 1 s window; the last one starts once a worker takes its job,
      // a few ms to a few hundred later on a busy machine: half a second of slack for that.
      expect(Date.parse(last.startedAt) - Date.parse(d.createdAt)).toBeLessThanOrEqual(1_500);
    }
  });

  it("re-checks the address at delivery: a name that now resolves to a private address is not called", async () => {
    const receiver = await startReceiver();
    perTest.push(receiver.close);
    // Registered while the name resolved to a public address (DNS rebinding: it now says 127.0.0.1).
    const user = await usersRepository(database.db).create();
    const { webhook } = await registerWebhook(
      {
        db: database.db,
        secretBox,
        policy: { allowPrivate: false, allowHttp: true },
        resolve: async () => [{ address: "93.184.216.34", family: 4 }],
      },
      user.id,
      { url: `http://localhost:${receiver.port}/hook`, events: ["start_task.status"] },
    );
    await startDispatcher({ WEBHOOK_ALLOW_PRIVATE: "false", WEBHOOK_RETRY_WINDOW_MS: "1000" });
    await createConversationFixture(database.db, { userId: user.id });

    const list = await waitFor(
      async () => {
        const l = await deliveriesOf(webhook.id);
        return l.length === 2 && l.every((d) => d.status === "failed") && l;
      },
      { what: "the deliveries to a rebound name to fail", timeoutMs: 15_000 },
    );
    for (const d of list) {
      expect(d.attemptList[0]?.statusCode).toBeNull();
      expect(d.attemptList[0]?.error).toMatch(/^refused address: resolves to (127\.0\.0\.1|::1)/);
    }
    expect(receiver.received).toHaveLength(0);
  });
});

describe("nextTryAt", () => {
  const config = {
    WEBHOOK_RETRY_BASE_MS: 5_000,
    WEBHOOK_RETRY_MAX_DELAY_MS: 3_600_000,
    WEBHOOK_RETRY_WINDOW_MS: 86_400_000,
  };
  it("doubles from the base up to the cap, and stops past the 24 h window", () => {
    const created = new Date(0).toISOString();
    const delay = (attempt: number, now = 0) =>
      (nextTryAt(config, created, attempt, now)?.getTime() ?? Number.NaN) - now;
    expect(delay(1)).toBeGreaterThanOrEqual(5_000);
    expect(delay(1)).toBeLessThanOrEqual(5_500);
    expect(delay(2)).toBeGreaterThanOrEqual(10_000);
    expect(delay(5)).toBeGreaterThanOrEqual(80_000);
    expect(delay(30)).toBeLessThanOrEqual(3_960_000);
    expect(nextTryAt(config, created, 30, 86_400_000 - 1_000)).toBeNull();
  });
});
