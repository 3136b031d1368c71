import { randomUUID } from "node:crypto";
import { createLogger, type StoredEvent } from "@tern/core";
import { agentRunsRepository, conversationsRepository, eventsRepository, usersRepository } from "@tern/db";
import {
  createRedisPrefix,
  createSandboxedConversation,
  createTestDatabase,
  prepareTestSandboxes,
  removeSandboxesOfNamespace,
  type SandboxedConversationInput,
  startLlmServer,
  testSandboxDriver,
  userMessageDraft,
} from "@tern/testing";
// The store the worker hands every run: the loop runs here as the worker runs it.
import { agentRunStore } from "../../../apps/worker/src/agent/run-store.ts";
import type { LlmProvider } from "../src/llm/types.ts";
import { type AgentRunDeps, runAgent } from "../src/loop.ts";
import { systemPromptTools } from "../src/tools/definitions.ts";

/** `none`: no LLM configured. */
type LlmSetting = LlmProvider | "none";

/**
 * The agent loop against the real things: its own Postgres database, sandboxes (labelled with a
 * namespace of the file's own) and the scripted LLM on loopback. Runs call `runAgent` directly,
 * as the worker's agent-run job does.
 */
export const createRunFixture = async () => {
  const database = await createTestDatabase();
  const namespace = createRedisPrefix();
  const llm = await startLlmServer();
  const sandboxes = testSandboxDriver();
  await prepareTestSandboxes(sandboxes);
  const logger = createLogger("agent-test", process.env.TEST_LOG_LEVEL ?? "silent");
  const user = await usersRepository(database.db).create();

  /** The worker's LLM settings for `provider`, as its config would parse them. */
  const depsFor = (provider: LlmSetting, maxIterations = 20): AgentRunDeps => {
    const env = llm.workerEnv(provider);
    return {
      store: agentRunStore(database.db),
      sandboxes,
      logger,
      settings: {
        LLM_PROVIDER: (env.LLM_PROVIDER || undefined) as LlmProvider | undefined,
        LLM_BASE_URL: env.LLM_BASE_URL || undefined,
        LLM_API_KEY: env.LLM_API_KEY || undefined,
        LLM_MODEL: env.LLM_MODEL || undefined,
        MAX_ITERATIONS: maxIterations,
      },
      // Retries back off from 50 ms, not 4 s: what is tested is that they happen, not how long they wait.
      llmOptions: { retry: { baseBackoffMs: 50 } },
    };
  };

  const conversation = async (conversationId: string) => {
    const c = await conversationsRepository(database.db).get(conversationId);
    if (!c) throw new Error("conversation gone");
    return c;
  };

  /** One run of the loop to its end; returns its outcome and the conversation after it. */
  const run = async (conversationId: string, provider: LlmSetting, maxIterations?: number) => {
    const runId = randomUUID();
    const outcome = await runAgent(depsFor(provider, maxIterations), conversationId, runId);
    return { runId, outcome, conversation: await conversation(conversationId) };
  };

  return {
    database,
    llm,
    sandboxes,
    depsFor,
    newConversation: (input: SandboxedConversationInput) =>
      createSandboxedConversation(
        { db: database.db, sandboxes, namespace, userId: user.id, tools: systemPromptTools() },
        input,
      ),
    conversation,
    run,
    sayToAgent: (conversationId: string, text: string) =>
      eventsRepository(database.db).append(conversationId, [userMessageDraft(text)]),
    events: (conversationId: string): Promise<StoredEvent[]> => eventsRepository(database.db).listAll(conversationId),
    exec: async (sandbox: string, command: string) =>
      (await sandboxes.exec(sandbox, { cmd: ["bash", "-c", command] })).stdout,
    runs: agentRunsRepository(database.db),
    close: async () => {
      await llm.close();
      await removeSandboxesOfNamespace(namespace, sandboxes);
      await database.drop();
    },
  };
};

export type RunFixture = Awaited<ReturnType<typeof createRunFixture>>;
