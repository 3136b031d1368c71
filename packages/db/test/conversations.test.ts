import { newId, openSessionApiKey, sealSessionApiKey } from "@tern/core";
import { createTestDatabase, type TestDatabase, testSecretBox } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ConversationsRepository,
  conversationsRepository,
  type NewConversation,
} from "../src/repositories/conversations.ts";
import { sandboxesRepository } from "../src/repositories/sandboxes.ts";
import { startTasksRepository } from "../src/repositories/start-tasks.ts";
import { usersRepository } from "../src/repositories/users.ts";

let database: TestDatabase;
let conversations: ConversationsRepository;
const box = testSecretBox();
/** The session key newConversation gives a conversation. */
const keyOf = (conversationId: string) => `session-${conversationId}`;

beforeAll(async () => {
  database = await createTestDatabase();
  conversations = conversationsRepository(database.db);
});

afterAll(async () => {
  await database?.drop();
});

const newConversation = async (userId: string, extra: Partial<NewConversation> = {}): Promise<NewConversation> => {
  const task = await startTasksRepository(database.db).create(userId, {});
  const conversationId = extra.id ?? newId();
  return {
    id: conversationId,
    userId,
    startTaskId: task.id,
    title: "t",
    sandboxId: null,
    sessionApiKey: sealSessionApiKey(box, conversationId, keyOf(conversationId)),
    selectedRepository: "acme/widgets",
    selectedBranch: "main",
    gitProvider: "github",
    llmModel: null,
    skills: [{ name: "s", triggers: ["x"], content: "c", source: "AGENTS.md" }],
    workspaceDir: "/workspace/widgets",
    ...extra,
  };
};

describe("conversations", () => {
  it("creates one conversation per start task: a second call returns the first", async () => {
    const userId = (await usersRepository(database.db).create()).id;
    const input = await newConversation(userId);
    const made = await conversations.createForTask(input);
    expect(made).toMatchObject({
      id: input.id,
      userId,
      startTaskId: input.startTaskId,
      executionStatus: "idle",
      sandboxStatus: "MISSING",
      skills: input.skills,
      metrics: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, llm_calls: 0 },
    });
    const again = await conversations.createForTask({ ...input, id: newId(), title: "other" });
    expect(again).toEqual(made);
    expect(await conversations.findByTask(input.startTaskId)).toEqual(made);
    expect(await conversations.findBySessionKey(keyOf(input.id))).toEqual(made);
    expect(await conversations.findBySessionKey("nope")).toBeNull();
  });

  it("stores no session key in plaintext; DELETE's revocation keeps nothing of it that could be shown", async () => {
    const userId = (await usersRepository(database.db).create()).id;
    const input = await newConversation(userId);
    const made = await conversations.createForTask(input);
    const key = keyOf(input.id);
    const row = async () =>
      (
        await sql<{
          row: string;
        }>`select row_to_json(c)::text as row from conversations c where id = ${input.id}`.execute(database.db)
      ).rows[0]?.row;
    expect(await row()).not.toContain(key);
    // Its owner still reads it back, and only for this conversation.
    expect(openSessionApiKey(box, made.id, made.sealedSessionApiKey)).toBe(key);
    expect(openSessionApiKey(box, newId(), made.sealedSessionApiKey)).toBeNull();

    await conversations.revokeSessionKey(input.id);
    expect(await conversations.findBySessionKey(key)).toBeNull();
    expect((await conversations.get(input.id))?.sealedSessionApiKey).toBeNull();
  });

  it("seals the plaintext keys of conversations made before sealed keys, once, on any replica", async () => {
    const userId = (await usersRepository(database.db).create()).id;
    const input = await newConversation(userId);
    await conversations.createForTask(input);
    // A row as migration 0090 leaves one made before it: the key in plaintext, no sealed form.
    const legacy = `legacy-${newId()}`;
    await database.db
      .updateTable("conversations")
      .set({ session_api_key: legacy, session_api_key_sealed: null, session_api_key_hash: null })
      .where("id", "=", input.id)
      .execute();
    const seal = (id: string, k: string) => sealSessionApiKey(box, id, k).sealed;
    const runs = await Promise.all([
      conversations.sealPlaintextSessionKeys(seal),
      conversations.sealPlaintextSessionKeys(seal),
    ]);
    expect(runs.reduce((a, b) => a + b, 0)).toBe(1);
    expect(await conversations.sealPlaintextSessionKeys(seal)).toBe(0);
    const after = await conversations.get(input.id);
    expect(openSessionApiKey(box, input.id, after?.sealedSessionApiKey ?? null)).toBe(legacy);
    expect((await conversations.findBySessionKey(legacy))?.id).toBe(input.id);
    const plain = await database.db
      .selectFrom("conversations")
      .select("session_api_key")
      .where("id", "=", input.id)
      .executeTakeFirst();
    expect(plain?.session_api_key).toBeNull();
  });

  it("reads sandbox_status from the sandbox row", async () => {
    const userId = (await usersRepository(database.db).create()).id;
    const input = await newConversation(userId);
    await conversations.createForTask(input);
    const sandbox = await sandboxesRepository(database.db).upsert({
      name: `tern-${input.id}`,
      image: "img",
      status: "RUNNING",
    });
    await conversations.setSandbox(input.id, sandbox.id);
    expect(await conversations.get(input.id)).toMatchObject({ sandboxId: sandbox.id, sandboxStatus: "RUNNING" });
    await sandboxesRepository(database.db).update(sandbox.id, { status: "PAUSED" });
    expect((await conversations.get(input.id))?.sandboxStatus).toBe("PAUSED");
    await conversations.setSandbox(input.id, null);
    expect((await conversations.get(input.id))?.sandboxStatus).toBe("MISSING");
  });

  it("scopes reads to the owner and pages them newest first", async () => {
    const users = usersRepository(database.db);
    const owner = (await users.create()).id;
    const other = (await users.create()).id;
    const mine = [];
    for (let i = 0; i < 4; i++) mine.push(await conversations.createForTask(await newConversation(owner)));
    const foreign = await conversations.createForTask(await newConversation(other));
    const found = await conversations.findForUser(owner, [mine[1]!.id, foreign.id]);
    expect(found.map((c) => c.id)).toEqual([mine[1]!.id]);
    expect(await conversations.findForUser(owner, [])).toEqual([]);

    const newestFirst = [...mine].reverse().map((c) => c.id);
    const page = await conversations.searchForUser(owner, { limit: 3 });
    expect(page.map((c) => c.id)).toEqual([...newestFirst.slice(0, 3), newestFirst[3]]); // limit + 1
    const last = page[2]!;
    const rest = await conversations.searchForUser(owner, {
      limit: 3,
      after: { key: last.createdAt, id: last.id },
    });
    expect(rest.map((c) => c.id)).toEqual(newestFirst.slice(3));
  });

  it("sets the execution status, and adds metrics atomically under concurrent runs", async () => {
    const userId = (await usersRepository(database.db).create()).id;
    const input = await newConversation(userId);
    await conversations.createForTask(input);
    await conversations.setExecutionStatus(input.id, "running");
    expect((await conversations.get(input.id))?.executionStatus).toBe("running");

    await Promise.all(
      Array.from({ length: 10 }, () =>
        conversations.addMetrics(input.id, {
          llm_calls: 1,
          prompt_tokens: 100,
          completion_tokens: 5,
          total_tokens: 105,
        }),
      ),
    );
    await conversations.addMetrics(input.id, { llm_calls: 0 });
    expect((await conversations.get(input.id))?.metrics).toMatchObject({
      llm_calls: 10,
      prompt_tokens: 1000,
      completion_tokens: 50,
      total_tokens: 1050,
    });
  });
});
