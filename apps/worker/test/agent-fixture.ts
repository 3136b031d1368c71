import { systemPromptTools } from "@tern/agent";
import { createLogger, newId, type Skill, type StoredEvent } from "@tern/core";
import {
  agentRunsRepository,
  conversationsRepository,
  eventsRepository,
  sandboxesRepository,
  startTasksRepository,
  usersRepository,
} from "@tern/db";
import { createQueues, createRedis, enqueueAgentRun, QueueName } from "@tern/queue";
import { createDockerDriver, ensureSandboxNetwork, SandboxLabel } from "@tern/sandbox";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type ScriptedLlmServer,
  startLlmServer,
  type TestDatabase,
  testRedisUrl,
} from "@tern/testing";
import { Worker } from "bullmq";
import Docker from "dockerode";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import { agentRunProcessor } from "../src/processors/agent-run.ts";

export const workspaceDir = "/workspace/project";

export type Provider = "openai" | "anthropic";
/** `none`: a worker with no LLM configured. */
export type WorkerLlm = Provider | "none";

/**
 * Real Postgres (own database), Redis (own prefix), Docker (own containers, labelled with the
 * prefix as namespace) and a scripted LLM on loopback; the agent-run processor runs in a BullMQ
 * worker of this process once a test asks for a run (tests that start worker processes use `env`).
 */
export const createAgentFixture = async () => {
  const database: TestDatabase = await createTestDatabase();
  const prefix = createRedisPrefix();
  const llm: ScriptedLlmServer = await startLlmServer();
  const docker = new Docker();
  const sandboxes = createDockerDriver(docker);
  const network = await ensureSandboxNetwork(docker, process.env.SANDBOX_NETWORK ?? "tern-sandboxes");
  const redis = createRedis(testRedisUrl(), "worker");
  const queues = createQueues(redis, prefix);
  const logger = createLogger("agent-test", (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent");
  const containers: string[] = [];

  const env = (provider: WorkerLlm, maxIterations = 20): Record<string, string> => ({
    DATABASE_URL: database.url,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: prefix,
    MAX_ITERATIONS: String(maxIterations),
    LOG_LEVEL: "warn",
    ...llm.workerEnv(provider),
  });

  let worker: Worker | null = null;
  let workerSetting = "";
  /** The in-process worker speaks to the scripted LLM as `provider`. */
  const useProvider = async (provider: WorkerLlm, maxIterations = 20) => {
    if (workerSetting === `${provider}/${maxIterations}`) return;
    await (worker as Worker | null)?.close();
    const config = loadWorkerConfig(env(provider, maxIterations));
    const deps: WorkerDeps = { config, db: database.db, redis, queues, sandboxes, pool: null, logger };
    worker = new Worker(QueueName.AgentRun, agentRunProcessor(deps), { connection: redis, prefix, concurrency: 4 });
    workerSetting = `${provider}/${maxIterations}`;
  };

  const users = usersRepository(database.db);
  const user = await users.create();

  const newConversation = async (input: {
    files?: Record<string, string>;
    skills?: Skill[];
    message?: string;
    llmModel?: string | null;
  }) => {
    const task = await startTasksRepository(database.db).create(user.id, {});
    const conversationId = newId();
    const info = await sandboxes.create({
      name: `tern-agent-test-${conversationId}`,
      image: process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest",
      labels: {
        [SandboxLabel.Marker]: "1",
        [SandboxLabel.Namespace]: prefix,
        [SandboxLabel.ConversationId]: conversationId,
      },
      limits: { memoryMb: 512, cpus: 1, pids: 256 },
      network: network.name,
    });
    containers.push(info.id);
    const setup = await sandboxes.exec(info.id, {
      cmd: ["bash", "-c", `mkdir -p ${workspaceDir} && cd ${workspaceDir} && git init -q .`],
    });
    if (setup.exitCode !== 0) throw new Error(`workspace setup failed: ${setup.stderr}`);
    if (input.files)
      await sandboxes.upload(
        info.id,
        workspaceDir,
        Object.entries(input.files).map(([path, content]) => ({ path, content })),
      );
    const sandboxRow = await sandboxesRepository(database.db).upsert({
      containerName: info.name,
      image: "tern-sandbox:latest",
      startTaskId: task.id,
      conversationId,
      status: "RUNNING",
    });
    await sandboxesRepository(database.db).update(sandboxRow.id, { containerId: info.id });
    await conversationsRepository(database.db).createForTask({
      id: conversationId,
      userId: user.id,
      startTaskId: task.id,
      title: null,
      sandboxId: sandboxRow.id,
      sessionApiKey: newId(),
      selectedRepository: "acme/project",
      selectedBranch: null,
      gitProvider: "github",
      llmModel: input.llmModel ?? null,
      skills: input.skills ?? [],
      workspaceDir,
    });
    await eventsRepository(database.db).append(conversationId, [
      {
        kind: "SystemPromptEvent",
        source: "agent",
        payload: { system_prompt: { type: "text", text: "You are the test agent." }, tools: systemPromptTools() },
      },
      ...(input.message ? [userMessage(input.message)] : []),
    ]);
    // A started conversation: its task is READY (else a worker's janitor would take the task up again).
    await database.db
      .updateTable("start_tasks")
      .set({ status: "READY", app_conversation_id: conversationId, sandbox_id: sandboxRow.id })
      .where("id", "=", task.id)
      .execute();
    return { conversationId, containerId: info.id };
  };

  const userMessage = (text: string) => ({
    kind: "MessageEvent" as const,
    source: "user" as const,
    payload: { llm_message: { role: "user", content: [{ type: "text", text }] } },
  });

  const sayToAgent = (conversationId: string, text: string) =>
    eventsRepository(database.db).append(conversationId, [userMessage(text)]);

  const events = (conversationId: string): Promise<StoredEvent[]> =>
    eventsRepository(database.db).listAll(conversationId);

  const conversation = async (conversationId: string) => {
    const c = await conversationsRepository(database.db).get(conversationId);
    if (!c) throw new Error("conversation gone");
    return c;
  };

  /** Waits until the run has ended (its agent_runs row is closed); returns the conversation. */
  const waitForRun = async (conversationId: string, runId: string, timeoutMs = 45_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = await database.db
        .selectFrom("agent_runs")
        .select(["ended_at", "status"])
        .where("id", "=", runId)
        .executeTakeFirst();
      if (run?.ended_at) return conversation(conversationId);
      if (Date.now() > deadline) throw new Error(`run ${runId} did not end in time`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  /** Waits until the run's BullMQ job is done (also when the run had nothing to do and wrote nothing). */
  const waitForJob = async (conversationId: string, runId: string, timeoutMs = 45_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await queues.agentRun.getJobState(`run-${conversationId}-${runId}`);
      if (state === "completed" || state === "failed") return state;
      if (Date.now() > deadline) throw new Error(`job of run ${runId} is still ${state}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  /** Enqueues a run as the pipeline and the API do, and waits for it to end. */
  const run = async (conversationId: string, provider: WorkerLlm, maxIterations?: number) => {
    await useProvider(provider, maxIterations);
    const runId = await enqueueAgentRun(queues, conversationId);
    return { runId, conversation: await waitForRun(conversationId, runId) };
  };

  const exec = async (containerId: string, command: string) => {
    const r = await sandboxes.exec(containerId, { cmd: ["bash", "-c", command] });
    return r.stdout;
  };

  const close = async () => {
    await (worker as Worker | null)?.close();
    await queues.close();
    redis.disconnect();
    await llm.close();
    await Promise.all(containers.map((id) => sandboxes.destroy(id)));
    await database.drop();
    await deleteRedisPrefix(prefix);
  };

  return {
    database,
    prefix,
    llm,
    docker,
    sandboxes,
    queues,
    env,
    useProvider,
    newConversation,
    sayToAgent,
    events,
    conversation,
    run,
    waitForRun,
    waitForJob,
    exec,
    runs: agentRunsRepository(database.db),
    close,
  };
};

export type AgentFixture = Awaited<ReturnType<typeof createAgentFixture>>;

/** The events' kinds in order, without the state changes, for compact assertions. */
export const kindsOf = (events: StoredEvent[]) =>
  events.filter((e) => e.kind !== "ConversationStateUpdateEvent").map((e) => e.kind);

export const statusChanges = (events: StoredEvent[]) =>
  events.filter((e) => e.kind === "ConversationStateUpdateEvent").map((e) => e.payload.value);
