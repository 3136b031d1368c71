import { systemPromptTools } from "@tern/agent";
import { createLogger, type StoredEvent } from "@tern/core";
import { agentRunsRepository, conversationsRepository, eventsRepository, usersRepository } from "@tern/db";
import { agentRunJobId, createQueues, createRedis, enqueueAgentRun, QueueName } from "@tern/queue";
import {
  createRedisPrefix,
  createSandboxedConversation,
  createTestDatabase,
  deleteRedisPrefix,
  prepareTestSandboxes,
  removeSandboxesOfNamespace,
  type SandboxedConversationInput,
  type ScriptedLlmServer,
  type ServiceProcess,
  startLlmServer,
  startService,
  type TestDatabase,
  testRedisUrl,
  testSandboxDriver,
  testSecretBox,
  userMessageDraft,
  waitFor,
} from "@tern/testing";
import { Worker } from "bullmq";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import { agentRunProcessor } from "../src/processors/agent-run.ts";

/** `none`: a worker with no LLM configured. */
export type WorkerLlm = "openai" | "anthropic" | "none";

/**
 * The agent-run job around the agent loop: real Postgres (own database), Redis (own prefix),
 * sandboxes (own ones, labelled with the prefix as namespace) and a scripted LLM on loopback.
 * The agent-run processor runs in a BullMQ worker of this process once a test asks for a run
 * (tests that start worker processes use `env` and `startWorker`). The loop itself is tested in packages/agent.
 */
export const createAgentFixture = async (opts: { env?: Record<string, string> } = {}) => {
  const database: TestDatabase = await createTestDatabase();
  const prefix = createRedisPrefix();
  const llm: ScriptedLlmServer = await startLlmServer();
  const sandboxes = testSandboxDriver();
  await prepareTestSandboxes(sandboxes);
  const redis = createRedis(testRedisUrl(), "worker");
  const queues = createQueues(redis, prefix);
  const logger = createLogger("agent-test", process.env.TEST_LOG_LEVEL ?? "silent");
  const user = await usersRepository(database.db).create();

  const env = (provider: WorkerLlm, maxIterations = 20): Record<string, string> => ({
    DATABASE_URL: database.url,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: prefix,
    MAX_ITERATIONS: String(maxIterations),
    LOG_LEVEL: "warn",
    ...llm.workerEnv(provider),
    ...opts.env,
  });

  let worker: Worker | null = null;
  let workerSetting = "";
  /** The in-process worker speaks to the scripted LLM as `provider`. */
  const useProvider = async (provider: WorkerLlm, maxIterations = 20) => {
    if (workerSetting === `${provider}/${maxIterations}`) return;
    await (worker as Worker | null)?.close();
    const config = loadWorkerConfig(env(provider, maxIterations));
    const deps: WorkerDeps = {
      config,
      db: database.db,
      redis,
      queues,
      sandboxes,
      engineId: null,
      pool: null,
      logger,
      secretBox: testSecretBox(),
    };
    worker = new Worker(QueueName.AgentRun, agentRunProcessor(deps), { connection: redis, prefix, concurrency: 4 });
    workerSetting = `${provider}/${maxIterations}`;
  };

  const newConversation = (input: SandboxedConversationInput) =>
    createSandboxedConversation(
      { db: database.db, sandboxes, namespace: prefix, userId: user.id, tools: systemPromptTools() },
      input,
    );

  const conversation = async (conversationId: string) => {
    const c = await conversationsRepository(database.db).get(conversationId);
    if (!c) throw new Error("conversation gone");
    return c;
  };

  /** Waits until the run has ended (its agent_runs row is closed); returns the conversation. */
  const waitForRun = async (conversationId: string, runId: string, timeoutMs = 45_000) => {
    await waitFor(
      async () =>
        (await database.db.selectFrom("agent_runs").select("ended_at").where("id", "=", runId).executeTakeFirst())
          ?.ended_at,
      { what: `run ${runId} to end`, timeoutMs },
    );
    return conversation(conversationId);
  };

  /** Waits until the run's BullMQ job is done (also when the run had nothing to do and wrote nothing). */
  const waitForJob = (conversationId: string, runId: string, timeoutMs = 45_000) =>
    waitFor(
      async () => {
        const state = await queues.agentRun.getJobState(agentRunJobId(conversationId, runId));
        return (state === "completed" || state === "failed") && state;
      },
      { what: `the job of run ${runId} to be done`, timeoutMs },
    );

  /** Enqueues a run as the pipeline and the API do, and waits for it to end. */
  const run = async (conversationId: string, provider: WorkerLlm, maxIterations?: number) => {
    await useProvider(provider, maxIterations);
    const runId = await enqueueAgentRun(queues, conversationId);
    return { runId, conversation: await waitForRun(conversationId, runId) };
  };

  /** Worker processes a test starts (to kill or stop one): killed at close if still running. */
  const processes: ServiceProcess[] = [];
  const startWorker = async (workerEnv: Record<string, string>) => {
    const p = await startService("worker", workerEnv);
    processes.push(p);
    return p;
  };

  const close = async () => {
    await Promise.all(processes.map((p) => p.kill()));
    await (worker as Worker | null)?.close();
    await queues.close();
    redis.disconnect();
    await llm.close();
    await removeSandboxesOfNamespace(prefix, sandboxes);
    await database.drop();
    await deleteRedisPrefix(prefix);
  };

  return {
    database,
    prefix,
    redis,
    logger,
    llm,
    sandboxes,
    queues,
    env,
    useProvider,
    startWorker,
    newConversation,
    sayToAgent: (conversationId: string, text: string) =>
      eventsRepository(database.db).append(conversationId, [userMessageDraft(text)]),
    events: (conversationId: string): Promise<StoredEvent[]> => eventsRepository(database.db).listAll(conversationId),
    conversation,
    run,
    waitForRun,
    waitForJob,
    exec: async (sandbox: string, command: string) =>
      (await sandboxes.exec(sandbox, { cmd: ["bash", "-c", command] })).stdout,
    runs: agentRunsRepository(database.db),
    close,
  };
};

export type AgentFixture = Awaited<ReturnType<typeof createAgentFixture>>;
