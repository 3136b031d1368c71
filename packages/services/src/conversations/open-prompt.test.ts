import { newId } from "@tern/core";
import {
  sandboxesRepository,
  startTaskSecretsRepository,
  startTasksRepository,
  userSecretsRepository,
  usersRepository,
} from "@tern/db";
import { createTestDatabase, type TestDatabase, testSecretBox } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openConversation, type SystemPromptContext } from "./open.ts";

/** The system prompt a conversation opens with is told its secrets by name, never by value, and the time. */
let database: TestDatabase;
const secretBox = testSecretBox();

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

describe("openConversation's system prompt", () => {
  it("gets the names of the user's and the start request's secrets, and the time it opens", async () => {
    const user = await usersRepository(database.db).create();
    const secrets = userSecretsRepository(database.db);
    await secrets.create({ userId: user.id, name: "GITHUB_TOKEN", description: "pushes", sealedValue: "sealed-1" });
    await secrets.create({ userId: user.id, name: "NPM_TOKEN", description: null, sealedValue: "sealed-2" });
    const task = await startTasksRepository(database.db).create(user.id, {});
    await startTaskSecretsRepository(database.db).put(task.id, { API_KEY: "sealed-3", NPM_TOKEN: "sealed-4" });
    const sandbox = await sandboxesRepository(database.db).upsert({
      name: `tern-sbx-${task.id}`,
      image: "tern-sandbox:latest",
      startTaskId: task.id,
      status: "RUNNING",
    });
    const seen: (SystemPromptContext | undefined)[] = [];
    const before = Date.now();
    await openConversation(
      { db: database.db, secretBox, defaultLlmModel: "gpt-test" },
      {
        task,
        conversationId: newId(),
        sandboxId: sandbox.id,
        workspace: { dir: "/workspace/project", repository: null },
        skills: [],
        hooks: [],
        systemPrompt: (_model, context) => {
          seen.push(context);
          return { text: "prompt", tools: [] };
        },
      },
    );
    expect(seen[0]?.secrets).toEqual([
      { name: "API_KEY", description: null },
      { name: "GITHUB_TOKEN", description: "pushes" },
      { name: "NPM_TOKEN", description: null },
    ]);
    expect(JSON.stringify(seen)).not.toMatch(/sealed-/);
    expect(seen[0]?.now.getTime()).toBeGreaterThanOrEqual(before);
  });
});
