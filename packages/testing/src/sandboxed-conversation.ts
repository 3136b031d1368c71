import { issueSessionApiKey, newEvent, newId, type Skill, type StoredEvent, type SystemPromptTool } from "@tern/core";
import {
  conversationsRepository,
  type Database,
  eventsRepository,
  sandboxesRepository,
  startTasksRepository,
} from "@tern/db";
import { type SandboxDriver, SandboxLabel } from "@tern/sandbox";
import type { Kysely } from "kysely";
import { testSecretBox } from "./secret-box.ts";

/** Where the agent works in a fixture's sandbox. */
export const fixtureWorkspaceDir = "/workspace/project";

export interface SandboxedConversationWorld {
  db: Kysely<Database>;
  sandboxes: SandboxDriver;
  /** The deployment namespace the sandbox is labelled with (a test file's Redis prefix). */
  namespace: string;
  userId: string;
  /** The tools the SystemPromptEvent lists (the agent's `systemPromptTools()`). */
  tools: SystemPromptTool[];
}

export interface SandboxedConversationInput {
  files?: Record<string, string>;
  skills?: Skill[];
  message?: string;
  llmModel?: string | null;
}

/** A user's message, as the API stores it. */
export const userMessageDraft = (text: string) => newEvent.userMessage([{ type: "text", text }]);

/**
 * A conversation as the start pipeline leaves it, without running the pipeline: a READY task, a
 * running sandbox with a git workspace holding `files`, the system prompt and (when given) the
 * user's first message. For tests of the agent loop and of the jobs that run it.
 */
export const createSandboxedConversation = async (
  world: SandboxedConversationWorld,
  input: SandboxedConversationInput = {},
): Promise<{ conversationId: string; sandboxRef: string }> => {
  const { db, sandboxes } = world;
  const conversationId = newId();
  const name = `tern-agent-test-${conversationId}`;
  // Every row in one transaction: a worker's janitor must never see the task in flight without a
  // job (it would start it for real, and its conversation would take this one's place). Written before
  // the container exists: a labelled container with no conversation row is an orphan to the janitor,
  // which removed one while it was being made or used (workspace-results, rescued by CI's retry).
  const sandboxId = await db.transaction().execute(async (trx) => {
    const task = await startTasksRepository(trx).create(world.userId, {});
    const sandboxRow = await sandboxesRepository(trx).upsert({
      name,
      image: "tern-sandbox:latest",
      startTaskId: task.id,
      conversationId,
      status: "RUNNING",
    });
    await conversationsRepository(trx).createForTask({
      id: conversationId,
      userId: world.userId,
      startTaskId: task.id,
      title: null,
      sandboxId: sandboxRow.id,
      sessionApiKey: issueSessionApiKey(testSecretBox(), conversationId).stored,
      selectedRepository: "acme/project",
      selectedBranch: null,
      gitProvider: "github",
      llmModel: input.llmModel ?? null,
      skills: input.skills ?? [],
      workspaceDir: fixtureWorkspaceDir,
    });
    await eventsRepository(trx).append(conversationId, [
      newEvent.systemPrompt("You are the test agent.", world.tools),
      ...(input.message ? [userMessageDraft(input.message)] : []),
    ]);
    // A started conversation: its task is READY.
    await trx
      .updateTable("start_tasks")
      .set({ status: "READY", app_conversation_id: conversationId, sandbox_id: sandboxRow.id })
      .where("id", "=", task.id)
      .execute();
    return sandboxRow.id;
  });
  const info = await sandboxes.create({
    name,
    image: process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest",
    labels: {
      [SandboxLabel.Marker]: "1",
      [SandboxLabel.Namespace]: world.namespace,
      [SandboxLabel.ConversationId]: conversationId,
    },
    limits: { memoryMb: 512, cpus: 1, pids: 256 },
  });
  await sandboxesRepository(db).update(sandboxId, { ref: info.ref });
  const setup = await sandboxes.exec(info.ref, {
    cmd: ["bash", "-c", `mkdir -p ${fixtureWorkspaceDir} && cd ${fixtureWorkspaceDir} && git init -q .`],
  });
  if (setup.exitCode !== 0) throw new Error(`workspace setup failed: ${setup.stderr}`);
  if (input.files)
    await sandboxes.upload(
      info.ref,
      fixtureWorkspaceDir,
      Object.entries(input.files).map(([path, content]) => ({ path, content })),
    );
  return { conversationId, sandboxRef: info.ref };
};

/** The events' kinds in order, without the state changes, for compact assertions. */
export const kindsOf = (events: StoredEvent[]) =>
  events.filter((e) => e.kind !== "ConversationStateUpdateEvent").map((e) => e.kind);

/** The execution_status values the events went through, in order. */
export const statusChanges = (events: StoredEvent[]) =>
  events
    .flatMap((e) => (e.kind === "ConversationStateUpdateEvent" && e.payload.key === "execution_status" ? [e] : []))
    .map((e) => e.payload.value);
