import { eventsRepository, startTasksRepository } from "@tern/db";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  createUserWithKey,
  deleteRedisPrefix,
  type ServiceProcess,
  startService,
  type TestDatabase,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, TernApiError } from "../src/index.ts";

let database: TestDatabase;
let api: ServiceProcess;
const prefix = createRedisPrefix();

const newUser = async () => {
  const { userId, key } = await createUserWithKey(database.db, { name: "sdk" });
  return { userId, client: createClient({ baseUrl: api.url, apiKey: key }) };
};

beforeAll(async () => {
  database = await createTestDatabase();
  api = await startService("api", { DATABASE_URL: database.url, REDIS_PREFIX: prefix });
});
afterAll(async () => {
  await api?.stop();
  await database?.drop();
  await deleteRedisPrefix(prefix);
});

describe("sdk client against the real API", () => {
  it("creates, lists and revokes keys; a revoked key's client gets TernApiError 401", async () => {
    const { client } = await newUser();
    const made = await client.keys.create({ name: "ci" });
    expect(made.key).toMatch(/^oh_/);
    const other = createClient({ baseUrl: api.url, apiKey: made.key });
    expect((await other.keys.list()).map((k) => k.name)).toEqual(["ci", "sdk"]);
    expect(await client.keys.revoke(made.id)).toEqual({ id: made.id, revoked: true });
    const err = await other.keys.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TernApiError);
    expect(err).toMatchObject({ status: 401, code: "unauthorized" });
  });

  it("starts a conversation and reads the task back; a bad field is a 422 naming it", async () => {
    const { client } = await newUser();
    const task = await client.conversations.start({
      title: "t",
      initial_message: { role: "user", content: [{ type: "text", text: "hi" }], run: false },
    });
    expect(task.status).toBe("WORKING");
    expect(await client.startTasks.get([task.id, "nope"])).toEqual([task, null]);
    expect((await client.startTasks.search({ limit: 5 })).items.map((t) => t.id)).toEqual([task.id]);
    const err = await client.conversations.start({ selected_branch: "a..b" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 422, code: "validation_failed" });
    expect((err as Error).message).toMatch(/^selected_branch: /);
  });

  it("startAndWait throws with the task's detail when the start fails", async () => {
    const { client, userId } = await newUser();
    const waiting = client.conversations
      .startAndWait({ title: "doomed" }, { intervalMs: 50, timeoutMs: 20_000 })
      .catch((e: unknown) => e);
    let taskId: string | undefined;
    while (!taskId) {
      const rows = await database.db.selectFrom("start_tasks").select("id").where("user_id", "=", userId).execute();
      taskId = rows[0]?.id;
      if (!taskId) await new Promise((r) => setTimeout(r, 20));
    }
    await startTasksRepository(database.db).markError(taskId, "PREPARING_REPOSITORY: no such branch 'nope'");
    const err = await waiting;
    expect(err).toBeInstanceOf(TernApiError);
    expect(err).toMatchObject({ code: "start_failed", message: "PREPARING_REPOSITORY: no such branch 'nope'" });
  });

  it("reads conversations and iterates every event, also with the session key", async () => {
    const { client, userId } = await newUser();
    const fixture = await createConversationFixture(database.db, { userId, title: "read me" });
    const drafts = Array.from({ length: 250 }, (_, i) => ({
      kind: i % 2 ? ("ActionEvent" as const) : ("MessageEvent" as const),
      source: "agent" as const,
      payload: { i },
    }));
    await eventsRepository(database.db).append(fixture.conversationId, drafts);
    const [conversation] = await client.conversations.get([fixture.conversationId]);
    expect(conversation?.title).toBe("read me");
    expect((await client.conversations.search()).items).toHaveLength(1);

    const seen: unknown[] = [];
    for await (const e of client.events.all(fixture.conversationId, { limit: 40, kind__eq: "ActionEvent" })) {
      seen.push(e.i);
    }
    expect(seen).toEqual(Array.from({ length: 125 }, (_, k) => 2 * k + 1));
    expect(await client.events.count(fixture.conversationId)).toBe(250);

    const session = createClient({ baseUrl: api.url, sessionApiKey: conversation?.session_api_key });
    expect(await session.events.count(fixture.conversationId, { kind__eq: "MessageEvent" })).toBe(125);
    expect(await session.keys.list().catch((e: TernApiError) => e.status)).toBe(401);
  });
});
