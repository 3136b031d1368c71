import { newEvent } from "@tern/core";
import { eventsRepository, usersRepository, webhooksRepository } from "@tern/db";
import { registerWebhook } from "@tern/services";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type ServiceProcess,
  startService,
  type TestDatabase,
  testRedisUrl,
  testSecretBox,
  waitFor,
} from "@tern/testing";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureHeaders, startReceiver } from "./webhooks-receiver.ts";

let database: TestDatabase;
const prefix = createRedisPrefix();
const workers: ServiceProcess[] = [];
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  database = await createTestDatabase();
  // The first try hangs (the receiver never answers it): the worker holding it is killed meanwhile.
  receiver = await startReceiver((n) => (n === 1 ? "hang" : 200));
});
afterAll(async () => {
  for (const w of workers) await w.kill().catch(() => undefined);
  await receiver?.close();
  await deleteRedisPrefix(prefix);
  await database?.drop();
});

describe("a webhook and a worker killed between the state change and the delivery", () => {
  it("is delivered by another worker, once, with a signature the package's own verifier accepts", async () => {
    const user = await usersRepository(database.db).create();
    const { webhook, secret } = await registerWebhook(
      { db: database.db, secretBox: testSecretBox(), policy: { allowPrivate: true, allowHttp: true } },
      user.id,
      { url: receiver.url, events: ["conversation.execution_status"] },
    );
    const fx = await createConversationFixture(database.db, { userId: user.id });
    // The state change commits while no worker runs: as if its process died right after the commit,
    // before anything was enqueued. Only the outbox row knows about it.
    await eventsRepository(database.db).append(fx.conversationId, [newEvent.executionStatus("finished")]);

    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      SANDBOX_POOL_SIZE: "0",
      WEBHOOK_ALLOW_PRIVATE: "true",
      WEBHOOK_ALLOW_HTTP: "true",
      WEBHOOK_SWEEP_INTERVAL_MS: "200",
      // A try is held for twice this: a dead worker's try is free again within 3 s.
      WEBHOOK_TIMEOUT_MS: "1500",
      // Short locks, so the killed worker's job is seen as stalled within seconds.
      WORKER_LOCK_DURATION_MS: "2000",
      WORKER_STALLED_INTERVAL_MS: "1000",
    };
    const first = await startService("worker", env);
    workers.push(first);
    // The first worker swept the outbox and is sending the delivery: kill it mid-try.
    await waitFor(() => receiver.received.length === 1, { what: "the first worker's try to reach the receiver" });
    await first.kill();
    const [delivery] = await webhooksRepository(database.db).listDeliveries(webhook.id, { limit: 10 });
    expect(delivery?.status).toBe("pending");
    expect(delivery?.attemptList).toEqual([]);

    const second = await startService("worker", env);
    workers.push(second);
    const done = await waitFor(
      async () => {
        const [d] = await webhooksRepository(database.db).listDeliveries(webhook.id, { limit: 10 });
        return d?.status === "delivered" && d;
      },
      { what: "the second worker to deliver", timeoutMs: 30_000, detail: () => second.output().slice(-2000) },
    );
    // The killed try left no record; the second worker's is the one that counts.
    expect(done.attemptList.map((a) => a.statusCode)).toEqual([200]);
    expect(receiver.received).toHaveLength(2);
    const [killed, delivered] = receiver.received;
    // The same message both times, so the receiver can tell the repeat of a try it never answered.
    expect(delivered?.headers["webhook-id"]).toBe(killed?.headers["webhook-id"]);
    const message = new Webhook(secret).verify(delivered?.body ?? "", signatureHeaders(delivered!)) as {
      type: string;
      data: { execution_status: string };
    };
    expect(message.type).toBe("conversation.execution_status");
    expect(message.data.execution_status).toBe("finished");
  });
});
