import { newId } from "@tern/core";
import { createTestDatabase, type TestDatabase } from "@tern/testing";
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

beforeAll(async () => {
  database = await createTestDatabase();
  conversations = conversationsRepository(database.db);
});

afterAll(async () => {
  await database?.drop();
});

const newConversation = async (userId: string, extra: Partial<NewConversation> = {}): Promise<NewConversation> => {
  const task = await startTasksRepository(database.db).create(userId, {});
  return {
    id: newId(),
    userId,
    startTaskId: task.id,
    title: "t",
    sandboxId: null,
    sessionApiKey: `session-${newId()}`,
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
    expect(await conversations.findBySessionKey(input.sessionApiKey)).toEqual(made);
    expect(await conversations.findBySessionKey("nope")).toBeNull();
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
