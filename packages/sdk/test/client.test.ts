import { conversationsRepository, eventsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { createConversationFixture, sampleEvent, scaled, startStack, type TestStack, waitFor } from "@tern/testing";
import { unzipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, TernApiError } from "../src/index.ts";

let stack: TestStack;

const newUser = async () => {
  const { userId, key } = await stack.newUser({ name: "sdk" });
  return { userId, client: createClient({ baseUrl: stack.api.url, apiKey: key }) };
};

beforeAll(async () => {
  stack = await startStack({ api: true });
}, scaled(60_000));
afterAll(async () => stack?.close());

describe("sdk client against the real API", () => {
  it("creates, lists and revokes keys; a revoked key's client gets TernApiError 401", async () => {
    const { client } = await newUser();
    const made = await client.keys.create({ name: "ci" });
    expect(made.key).toMatch(/^oh_/);
    const other = createClient({ baseUrl: stack.api.url, apiKey: made.key });
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
    const taskId = await waitFor(
      async () =>
        (await stack.database.db.selectFrom("start_tasks").select("id").where("user_id", "=", userId).execute())[0]?.id,
      { what: "the start task to be written", intervalMs: 20 },
    );
    await startTasksRepository(stack.database.db).markError(taskId, "PREPARING_REPOSITORY: no such branch 'nope'");
    const err = await waiting;
    expect(err).toBeInstanceOf(TernApiError);
    expect(err).toMatchObject({ code: "start_failed", message: "PREPARING_REPOSITORY: no such branch 'nope'" });
  });

  it("reads conversations and iterates every event, also with the session key", async () => {
    const { client, userId } = await newUser();
    const fixture = await createConversationFixture(stack.database.db, { userId, title: "read me" });
    // Each event numbered by its history_seq.
    const drafts = Array.from({ length: 250 }, (_, i) => sampleEvent(i % 2 ? "ActionEvent" : "MessageEvent", i));
    await eventsRepository(stack.database.db).append(fixture.conversationId, drafts);
    const [conversation] = await client.conversations.get([fixture.conversationId]);
    expect(conversation?.title).toBe("read me");
    expect((await client.conversations.search()).items).toHaveLength(1);

    const seen: unknown[] = [];
    for await (const e of client.events.all(fixture.conversationId, { limit: 40, kind__eq: "ActionEvent" })) {
      seen.push(e.kind === "ActionEvent" ? e.history_seq : e.kind);
    }
    expect(seen).toEqual(Array.from({ length: 125 }, (_, k) => 2 * k + 1));
    expect(await client.events.count(fixture.conversationId)).toBe(250);

    const session = createClient({ baseUrl: stack.api.url, sessionApiKey: conversation?.session_api_key ?? undefined });
    expect(await session.events.count(fixture.conversationId, { kind__eq: "MessageEvent" })).toBe(125);
    expect(await session.keys.list().catch((e: TernApiError) => e.status)).toBe(401);
  });

  it("reads sandboxes, sandbox specs, a conversation's skills, hooks and trajectory; commands on a removed sandbox are 410", async () => {
    const { client, userId } = await newUser();
    const fixture = await createConversationFixture(stack.database.db, { userId });
    const sandbox = await sandboxesRepository(stack.database.db).upsert({
      name: `tern-sdk-test-${fixture.taskId}`,
      image: "tern-sandbox:latest",
      startTaskId: fixture.taskId,
      conversationId: fixture.conversationId,
      status: "MISSING",
    });
    await conversationsRepository(stack.database.db).setSandbox(fixture.conversationId, sandbox.id);
    await eventsRepository(stack.database.db).append(fixture.conversationId, [sampleEvent("MessageEvent", 1)]);
    const hex = sandbox.id.replaceAll("-", "");

    const page = await client.sandboxes.search({ limit: 10 });
    expect(page.items.map((s) => [s.id, s.status, s.sandbox_spec_id])).toEqual([
      [hex, "MISSING", "tern-sandbox:latest"],
    ]);
    expect(await client.sandboxes.get([hex, "nope"])).toEqual([page.items[0], null]);
    await expect(client.sandboxes.pause(hex)).rejects.toMatchObject({ status: 410, code: "gone" });
    await expect(client.sandboxes.resume(hex)).rejects.toMatchObject({ status: 410, code: "gone" });
    expect(await client.sandboxes.remove(hex)).toEqual({ success: true });
    await expect(client.conversations.readFile(fixture.conversationId, "README.md")).rejects.toMatchObject({
      status: 410,
    });

    const specs = await client.sandboxSpecs.search();
    expect(specs.items.map((s) => s.id)).toEqual(["tern-sandbox:latest"]);
    expect(await client.sandboxSpecs.get(["tern-sandbox:latest", "x"])).toEqual([specs.items[0], null]);

    expect(await client.conversations.skills(fixture.conversationId)).toEqual({ skills: [] });
    expect(await client.conversations.hooks(fixture.conversationId)).toEqual({ hooks: [] });
    const files = unzipSync(await client.conversations.download(fixture.conversationId));
    expect(Object.keys(files)).toHaveLength(2);
    expect(Object.keys(files)[0]).toBe("meta.json");
    await expect(client.conversations.download(fixture.taskId)).rejects.toMatchObject({ status: 404 });
  });
});
