import {
  metrics,
  newId,
  type StartRequest,
  type StartTask,
  type StartTaskStatus,
  type SystemPromptTool,
} from "@tern/core";
import { agentRunOutboxRepository, type Database, startTasksRepository, warmSandboxesRepository } from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import type { Kysely } from "kysely";
import type { ServiceDeps } from "../deps.ts";
import { openConversation } from "./open.ts";

/** What the API's warm claim needs besides the services' own deps. */
export interface WarmStartDeps {
  /**
   * The engine-agnostic spec a start asks the warm rows for (the deployment's SANDBOX_IMAGE).
   * Absent: every start goes to the queue.
   */
  warmSpec?: string;
}

/**
 * A start the API may serve from a warm row in its own transaction: one that needs no repository
 * (the warm sandbox holds the empty workspace and nothing else). A start with one goes to the queue.
 */
export const isWarmClaimable = (request: StartRequest): boolean => !request.selected_repository;

/** The stages a claimed start goes through, in the queue path's order: each is recorded with its time. */
const CLAIMED_STAGES: StartTaskStatus[] = [
  "PREPARING_REPOSITORY",
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "SETTING_UP_SKILLS",
];

/**
 * Issue 23 §1, in the start's transaction `trx` (the task already written, WORKING): takes a warm
 * row of `spec` (FOR UPDATE SKIP LOCKED), records its sandbox for the task, opens the conversation
 * (its record, its first events, the agent run as an outbox entry) and makes the task READY with
 * its stage history. Returns null, having written nothing, when no row is free: the caller goes
 * on with the queue path in the same transaction. The API talks to no engine here: the agent
 * run's first exec proves the sandbox alive (the worker replaces a dead one).
 */
export const claimWarmStart = async (
  trx: Kysely<Database>,
  deps: Pick<ServiceDeps, "queues" | "logger" | "secretBox">,
  task: StartTask,
  spec: string,
): Promise<{ task: StartTask; outboxId: string | null } | null> => {
  const secretBox = deps.secretBox;
  if (!secretBox) return null;
  const history: { status: string; at: string }[] = [{ status: "WORKING", at: task.createdAt }];
  const enter = (status: StartTaskStatus) => history.push({ status, at: new Date().toISOString() });
  enter("WAITING_FOR_SANDBOX");
  const conversationId = task.request.conversation_id ?? newId();
  // The row becomes the conversation's sandbox (same id, name and container), in the same statement.
  const warm = await warmSandboxesRepository(trx).claim(spec, conversationId, { taskId: task.id, userId: task.userId });
  if (!warm) {
    metrics.poolClaims.inc({ result: "miss" });
    return null;
  }
  for (const s of CLAIMED_STAGES) enter(s);
  enter("STARTING_CONVERSATION");
  let outboxId: string | null = null;
  const conversation = await openConversation(
    {
      db: trx,
      queues: deps.queues,
      secretBox,
      logger: deps.logger,
      defaultLlmModel: warm.llmModel,
      engineId: warm.engineId,
      runOutbox: (id) => {
        outboxId = id;
      },
    },
    {
      task,
      conversationId,
      sandboxId: warm.id,
      workspace: { dir: warm.workspaceDir, repository: null },
      skills: [],
      hooks: [],
      systemPrompt: () => ({ text: warm.systemPrompt.text, tools: warm.systemPrompt.tools as SystemPromptTool[] }),
    },
  );
  enter("READY");
  const ready = await startTasksRepository(trx).readyFromWarmClaim(task.id, {
    conversationId: conversation.id,
    sandboxId: warm.id,
    history,
  });
  if (!ready) throw new Error(`start task ${task.id} left WORKING inside its own transaction`);
  metrics.poolClaims.inc({ result: "hit" });
  return { task: ready, outboxId };
};

/**
 * After the claim committed: the agent run's outbox entry is enqueued now, off the answer's path.
 * One that fails stays in the outbox, and a worker's relay enqueues it (never lost).
 */
export const relayClaimedRun = (deps: Pick<ServiceDeps, "db" | "queues" | "logger">, outboxId: string): Promise<void> =>
  agentRunOutboxRepository(deps.db)
    .relay(
      async (e) => {
        await enqueueAgentRun(deps.queues, e.conversationId, e.runId, e.engineId);
      },
      { ids: [outboxId] },
    )
    .then(
      () => undefined,
      (err: unknown) => deps.logger.warn({ err, outbox_id: outboxId }, "agent run left to the outbox relay"),
    );
