import {
  issueSessionApiKey,
  metrics,
  newEvent,
  newId,
  type StartRequest,
  type StartTask,
  type StartTaskStatus,
  type SystemPromptTool,
  toHexId,
} from "@tern/core";
import {
  claimWarmStartAtOnce,
  type Database,
  type RequestedRun,
  startTasksRepository,
  warmSandboxesRepository,
} from "@tern/db";
import type { Kysely } from "kysely";
import type { ServiceDeps } from "../deps.ts";
import { startQuotaError } from "../quotas.ts";
import { openConversation, PLAN_AGENT_INSTRUCTION } from "./open.ts";
import { requestRun } from "./runs.ts";

/** A start a warm claim served: READY, and its first run when it has an initial message. */
export interface WarmClaimed {
  task: StartTask;
  run: RequestedRun | null;
}

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

/**
 * A warm start, counted where it was served (the API), in the start metrics every start is counted
 * in: READY, with its claim as the one stage it went through (from the claim's first statement to
 * its commit), and its time to READY as the task's own timestamps say.
 */
export const countWarmStart = (task: StartTask, claimSeconds: number): void => {
  metrics.startStageDuration.observe({ path: "warm", stage: "WARM_CLAIM" }, claimSeconds);
  metrics.startOutcomes.inc({ path: "warm", status: "READY", error_stage: "" });
  metrics.timeToReady.observe(
    { path: "warm" },
    Math.max(0, Date.parse(task.updatedAt) - Date.parse(task.createdAt)) / 1000,
  );
};

/** The stages a claimed start goes through, in the queue path's order: each is recorded with its time. */
const CLAIMED_STAGES: StartTaskStatus[] = [
  "PREPARING_REPOSITORY",
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "SETTING_UP_SKILLS",
];

/**
 * In the start's transaction `trx` (the task already written, WORKING): takes a warm
 * row of `spec` (FOR UPDATE SKIP LOCKED), records its sandbox for the task, opens the conversation
 * (its record, its first events, its first run as a queued row) and makes the task READY with
 * its stage history. Returns null, having written nothing, when no row is free: the caller goes
 * on with the queue path in the same transaction. The API talks to no engine here: the agent
 * run's first exec proves the sandbox alive (the worker replaces a dead one).
 */
export const claimWarmStart = async (
  trx: Kysely<Database>,
  deps: Pick<ServiceDeps, "secretBox">,
  task: StartTask,
  spec: string,
): Promise<WarmClaimed | null> => {
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
  const conversation = await openConversation(
    { db: trx, secretBox, defaultLlmModel: warm.llmModel },
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
  const run = task.request.initial_message
    ? await requestRun(trx, conversation.id, warm.engineId, conversation.id)
    : null;
  enter("READY");
  const ready = await startTasksRepository(trx).readyFromWarmClaim(task.id, {
    conversationId: conversation.id,
    sandboxId: warm.id,
    history,
  });
  if (!ready) throw new Error(`start task ${task.id} left WORKING inside its own transaction`);
  metrics.poolClaims.inc({ result: "hit" });
  return { task: ready, run };
};

/**
 * The warm claim in one round trip (`tern_warm_claim`): what `claimWarmStart` does inside the start's
 * transaction, and the transaction itself (quotas, task, first run), as one statement. For a start
 * whose request is already resolved and masked and that carries no secrets of its own (those are
 * sealed apart in the start's transaction: that start takes the transaction path). The message is
 * stored as given: the caller masked it with every secret the conversation will have (the user's).
 * Null on a miss, having written nothing (the caller goes to the queue); a quota refusal throws.
 */
export const claimWarmStartFast = async (
  deps: Pick<ServiceDeps, "db" | "secretBox" | "limits">,
  userId: string,
  request: StartRequest,
  spec: string,
): Promise<WarmClaimed | null> => {
  const secretBox = deps.secretBox;
  if (!secretBox) return null;
  const conversationId = request.conversation_id ?? newId();
  const initial = request.initial_message;
  const out = await claimWarmStartAtOnce(deps.db, {
    userId,
    taskId: newId(),
    conversationId,
    request,
    spec,
    maxInFlight: deps.limits?.maxStartsInFlightPerUser,
    maxSandboxes: deps.limits?.maxSandboxesPerUser,
    title: request.title ?? `Conversation ${toHexId(conversationId).slice(0, 5)}`,
    sessionKey: issueSessionApiKey(secretBox, conversationId).stored,
    llmModel: request.llm_model ?? null,
    selectedBranch: request.selected_branch ?? null,
    gitProvider: request.git_provider ?? null,
    trigger: request.trigger ?? null,
    prNumber: request.pr_number ?? [],
    parentConversationId: request.parent_conversation_id ?? null,
    public: request.public ?? null,
    agentType: request.agent_type ?? "default",
    promptSuffixes: [
      ...(request.agent_type === "plan" ? [PLAN_AGENT_INSTRUCTION] : []),
      ...(request.system_message_suffix ? [request.system_message_suffix] : []),
    ],
    systemEventId: newId(),
    // A warm sandbox has no skills, so no skill is triggered by the message.
    userMessage: initial ? { id: newId(), payload: newEvent.userMessage(initial.content, []).payload } : null,
  });
  if (out.outcome === "quota") {
    const err = startQuotaError(out, deps.limits);
    if (!err) throw new Error("tern_warm_claim refused a start within the quotas");
    throw err;
  }
  if (out.outcome === "miss") {
    metrics.poolClaims.inc({ result: "miss" });
    return null;
  }
  metrics.poolClaims.inc({ result: "hit" });
  metrics.eventsAppended.inc(initial ? 2 : 1);
  return { task: out.task, run: out.run };
};
