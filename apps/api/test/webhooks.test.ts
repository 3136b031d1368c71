import { newEvent } from "@tern/core";
import { eventsRepository, startTasksRepository } from "@tern/db";
import { createConversationFixture, userMessageDraft } from "@tern/testing";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/** Default settings: only https URLs on public addresses. */
let api: TestApi;
/** WEBHOOK_ALLOW_PRIVATE and WEBHOOK_ALLOW_HTTP on, as for a receiver on this machine. */
let open: TestApi;
beforeAll(async () => {
  [api, open] = await Promise.all([
    startTestApi(),
    startTestApi({ env: { WEBHOOK_ALLOW_PRIVATE: "true", WEBHOOK_ALLOW_HTTP: "true" } }),
  ]);
});
afterAll(async () => {
  await Promise.all([api?.close(), open?.close()]);
});

interface WebhookRecord {
  id: string;
  url: string;
  events: string[];
  created_at: string;
  secret?: string;
}
interface DeliveryRecord {
  id: string;
  type: string;
  status: string;
  data: Record<string, unknown>;
  attempts: unknown[];
}
const errorOf = async (res: Response) =>
  ((await res.json()) as { error: { code: string; message: string; details?: unknown } }).error;
const allEvents = ["start_task.status", "conversation.execution_status", "conversation.event"];

const register = (t: TestApi, key: string, json: unknown) => t.call("/api/v1/webhooks", { key, method: "POST", json });

const deliveriesOf = async (t: TestApi, key: string, id: string): Promise<DeliveryRecord[]> => {
  const res = await t.call(`/api/v1/webhooks/${id}/deliveries?limit=100`, { key });
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: DeliveryRecord[] }).items;
};

describe("POST /api/v1/webhooks", () => {
  it("generates a Standard Webhooks secret, shows it once, and lists the webhook without it", async () => {
    const { key } = await open.newUser();
    const res = await register(open, key, { url: "http://127.0.0.1:9/hook", events: ["conversation.event"] });
    expect(res.status).toBe(201);
    const created = (await res.json()) as WebhookRecord;
    expect(created.id).toMatch(/^[0-9a-f]{32}$/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    // The package's own verifier takes it as a key.
    expect(() => new Webhook(created.secret ?? "")).not.toThrow();
    expect(created.events).toEqual(["conversation.event"]);

    const list = (await (await open.call("/api/v1/webhooks", { key })).json()) as WebhookRecord[];
    expect(list).toEqual([
      { id: created.id, url: created.url, events: created.events, created_at: created.created_at },
    ]);
    expect(JSON.stringify(list)).not.toContain(created.secret);
  });

  it("keeps a secret the caller gives, stored sealed (the row never holds it in clear)", async () => {
    const { key } = await open.newUser();
    const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    const res = await register(open, key, { url: "http://127.0.0.1:9/x", events: allEvents, secret });
    expect(res.status).toBe(201);
    const created = (await res.json()) as WebhookRecord;
    expect(created.secret).toBe(secret);
    const row = await open.database.db.selectFrom("webhooks").selectAll().executeTakeFirstOrThrow();
    expect(JSON.stringify(await open.database.db.selectFrom("webhooks").selectAll().execute())).not.toContain(
      secret.slice(6),
    );
    expect(row.secret_sealed.startsWith("v1.")).toBe(true);
  });

  it("refuses a URL that is not https, with 422 naming the field", async () => {
    const { key } = await api.newUser();
    const res = await register(api, key, { url: "http://93.184.216.34/hook", events: ["conversation.event"] });
    expect(res.status).toBe(422);
    const err = await errorOf(res);
    expect(err.code).toBe("validation_failed");
    expect(err.message).toMatch(/^url: must be an https URL/);
    // Plain http is refused by its own setting, even where private addresses are allowed.
    const closed = await startTestApi({ env: { WEBHOOK_ALLOW_PRIVATE: "true" } });
    try {
      const user = await closed.newUser();
      expect((await register(closed, user.key, { url: "http://127.0.0.1:9/", events: allEvents })).status).toBe(422);
      expect((await register(closed, user.key, { url: "https://127.0.0.1:9/", events: allEvents })).status).toBe(201);
    } finally {
      await closed.close();
    }
  });

  it("refuses private, loopback, link-local and other non-public addresses with 422, however written", async () => {
    const { key } = await api.newUser();
    for (const url of [
      "https://127.0.0.1/hook",
      "https://localhost/hook",
      "https://10.1.2.3/",
      "https://172.16.0.1/",
      "https://192.168.1.1/",
      "https://169.254.169.254/latest/meta-data",
      "https://100.64.0.1/",
      "https://0.0.0.0/",
      "https://[::1]/",
      "https://[fe80::1]/",
      "https://[fd00::1]/",
      "https://[::ffff:127.0.0.1]/",
      "https://[::ffff:169.254.169.254]/",
      "https://2130706433/",
      "https://0x7f.1/",
    ]) {
      const res = await register(api, key, { url, events: allEvents });
      expect(res.status, url).toBe(422);
      expect((await errorOf(res)).message, url).toMatch(/^url: resolves to .*private, loopback or link-local/);
    }
    expect((await (await api.call("/api/v1/webhooks", { key })).json()) as unknown[]).toEqual([]);
  });

  it("refuses a name that does not resolve, credentials in the URL, unknown events and a malformed secret", async () => {
    const { key } = await api.newUser();
    const cases: unknown[] = [
      { url: "https://no-such-host.invalid/", events: allEvents },
      { url: "https://user:pw@93.184.216.34/", events: allEvents },
      { url: "not a url", events: allEvents },
      { url: "https://93.184.216.34/", events: [] },
      { url: "https://93.184.216.34/", events: ["conversation.deleted"] },
      { url: "https://93.184.216.34/", events: allEvents, secret: "hunter2" },
      { url: "https://93.184.216.34/", events: allEvents, extra: 1 },
      { events: allEvents },
    ];
    for (const json of cases) {
      const res = await register(api, key, json);
      expect(res.status, JSON.stringify(json)).toBe(422);
      expect((await errorOf(res)).code).toBe("validation_failed");
    }
  });
});

describe("another user's webhook", () => {
  it("is 404 to delete and to list the deliveries of, and absent from the list", async () => {
    const alice = await open.newUser();
    const bob = await open.newUser();
    const created = (await (
      await register(open, alice.key, { url: "http://127.0.0.1:9/a", events: allEvents })
    ).json()) as WebhookRecord;

    for (const [path, method] of [
      [`/api/v1/webhooks/${created.id}`, "DELETE"],
      [`/api/v1/webhooks/${created.id}/deliveries`, "GET"],
    ] as const) {
      const res = await open.call(path, { key: bob.key, method });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect((await errorOf(res)).code).toBe("not_found");
    }
    expect((await (await open.call("/api/v1/webhooks", { key: bob.key })).json()) as unknown[]).toEqual([]);
    // Still Alice's, and hers to delete: once.
    expect((await open.call(`/api/v1/webhooks/${created.id}/deliveries`, { key: alice.key })).status).toBe(200);
    expect((await open.call(`/api/v1/webhooks/${created.id}`, { key: alice.key, method: "DELETE" })).status).toBe(200);
    expect((await open.call(`/api/v1/webhooks/${created.id}`, { key: alice.key, method: "DELETE" })).status).toBe(404);
    expect((await open.call("/api/v1/webhooks/not-an-id", { key: alice.key, method: "DELETE" })).status).toBe(404);
  });
});

describe("the outbox", () => {
  it("gets a delivery per subscribed change, written with the change, for the owner's webhooks only", async () => {
    const { key, userId } = await open.newUser();
    const all = (await (
      await register(open, key, { url: "http://127.0.0.1:9/all", events: allEvents })
    ).json()) as WebhookRecord;
    const statusOnly = (await (
      await register(open, key, { url: "http://127.0.0.1:9/status", events: ["conversation.execution_status"] })
    ).json()) as WebhookRecord;
    const db = open.database.db;

    const fx = await createConversationFixture(db, { userId });
    await eventsRepository(db).append(fx.conversationId, [
      newEvent.executionStatus("running"),
      userMessageDraft("hello <b>there</b>"),
    ]);
    // Another user's conversation feeds nobody's webhook here.
    const other = await createConversationFixture(db);
    await eventsRepository(db).append(other.conversationId, [newEvent.executionStatus("running")]);
    // A change rolled back leaves no delivery behind: the outbox row is in the change's transaction.
    await expect(
      db.transaction().execute(async (trx) => {
        await eventsRepository(trx).append(fx.conversationId, [newEvent.executionStatus("finished")]);
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    await expect(
      db.transaction().execute(async (trx) => {
        await startTasksRepository(trx).markError(fx.taskId, "never");
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");

    const items = await deliveriesOf(open, key, all.id);
    const types = items.map((d) => d.type).sort();
    expect(types).toEqual([
      "conversation.event",
      "conversation.event",
      "conversation.execution_status",
      "start_task.status",
      "start_task.status",
    ]);
    for (const d of items) {
      expect(d.status).toBe("pending");
      expect(d.attempts).toEqual([]);
      expect(d.id).toMatch(/^msg_[0-9a-f]{32}$/);
    }
    const hex = fx.conversationId.replaceAll("-", "");
    const statuses = items.filter((d) => d.type === "start_task.status").map((d) => d.data.status);
    expect(statuses.sort()).toEqual(["READY", "WORKING"]);
    const message = items.find(
      (d) => d.type === "conversation.event" && (d.data.event as { kind: string }).kind === "MessageEvent",
    );
    expect(message?.data.conversation_id).toBe(hex);
    expect((message?.data.event as { timestamp?: string } | undefined)?.timestamp).toMatch(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z$/,
    );
    expect(JSON.stringify(message?.data ?? {})).toContain("hello <b>there</b>");
    const execution = items.find((d) => d.type === "conversation.execution_status");
    expect(execution?.data).toMatchObject({ conversation_id: hex, execution_status: "running" });

    const onlyStatus = await deliveriesOf(open, key, statusOnly.id);
    expect(onlyStatus.map((d) => d.type)).toEqual(["conversation.execution_status"]);

    // A deleted webhook gets nothing new, and its pending deliveries are dropped.
    expect((await open.call(`/api/v1/webhooks/${statusOnly.id}`, { key, method: "DELETE" })).status).toBe(200);
    await eventsRepository(db).append(fx.conversationId, [newEvent.executionStatus("finished")]);
    const after = await db
      .selectFrom("webhook_deliveries")
      .select(["status"])
      .where("webhook_id", "=", statusOnly.id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5"))
      .execute();
    expect(after).toEqual([{ status: "failed" }]);
  });
});
