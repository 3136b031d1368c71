import { ConflictError, maskSecrets, type StartRequest, type StartTask } from "@tern/core";
import { conversationsRepository, startTasksRepository, WAITING_FOR_WORKER } from "@tern/db";
import { enqueue } from "@tern/queue";
import type { ServiceDeps } from "../deps.ts";
import { ownedConversation } from "../ownership.ts";
import { assertQueueReady, withJobQueue } from "../queue-availability.ts";
import { assertMessageSize, assertStartAllowed } from "../quotas.ts";
import { type SandboxImagesConfig, specOfStart } from "../sandbox-specs.ts";
import { agentSecretEnv, maskedSecrets, storeStartSecrets } from "../secrets.ts";
import { assertModelAllowed } from "../settings.ts";
import { enqueueRun } from "./runs.ts";
import { claimWarmStart, countWarmStart, isWarmClaimable, type WarmStartDeps } from "./warm-start.ts";

/**
 * What the start request means before the task is written: a parent of the caller's (404
 * otherwise) lends its repository, branch, provider and model where the request gives none, and a
 * `conversation_id` must be free (409). Returns the request as it is kept on the task.
 */
export const resolveStartRequest = async (
  deps: Pick<ServiceDeps, "db">,
  userId: string,
  request: StartRequest,
): Promise<StartRequest> => {
  let resolved = request;
  if (request.parent_conversation_id) {
    const parent = await ownedConversation(deps, { userId }, request.parent_conversation_id);
    resolved = {
      ...resolved,
      ...(resolved.selected_repository == null && parent.selectedRepository
        ? {
            selected_repository: parent.selectedRepository,
            selected_branch: resolved.selected_branch ?? parent.selectedBranch,
            git_provider: resolved.git_provider ?? parent.gitProvider,
          }
        : {}),
      llm_model: resolved.llm_model ?? parent.llmModel,
    };
  }
  if (request.conversation_id) {
    if (await conversationsRepository(deps.db).idInUse(request.conversation_id)) {
      throw new ConflictError("conversation_id: a conversation with this id exists");
    }
  }
  return resolved;
};

/**
 * Starts a conversation for `userId`: a WORKING start task and its `conversation.start` job, which
 * stand or fall together. The job is added inside the task's transaction, so a queue failure rolls
 * the row back (UnavailableError), and a commit that fails after the add leaves a job whose task
 * does not exist, which the worker drops. A task never sits in WORKING unqueued.
 * With `limits`, a start past the user's quotas is refused (QuotaExceededError) in that same
 * transaction, and an initial message longer than MAX_MESSAGE_BYTES (PayloadTooLargeError).
 * A parent conversation lends what the request leaves out (resolveStartRequest); the task keeps
 * the request so resolved.
 */
export const startConversation = async (
  deps: Pick<
    ServiceDeps,
    | "db"
    | "queues"
    | "redis"
    | "logger"
    | "queueTimeoutMs"
    | "limits"
    | "secretBox"
    | "llmModels"
    | "workersAlive"
    | "onStartWaiting"
  > &
    WarmStartDeps & { config?: SandboxImagesConfig },
  userId: string,
  asked: StartRequest,
): Promise<StartTask> => {
  if (asked.initial_message) assertMessageSize(asked.initial_message.content, deps.limits);
  // The default spec is kept as none: such a start is like every other (warm sandboxes serve it).
  const { sandbox_spec_id: askedSpec, ...unspecified } = asked;
  const spec = await specOfStart(deps, askedSpec, "body");
  const given: StartRequest = spec ? { ...unspecified, sandbox_spec_id: spec } : unspecified;
  const { secrets, ...rest } = given;
  const withSecrets = secrets && Object.keys(secrets).length > 0 ? secrets : null;
  // The task keeps (and echoes) the request with the secrets' names only; their values are sealed apart.
  const secretBox = deps.secretBox;
  let request: StartRequest = withSecrets ? { ...rest, secrets: maskedSecrets(withSecrets) } : rest;
  // A secret value pasted into the message is kept as <secret:NAME> there too, as in every event.
  if (request.initial_message && secretBox) {
    const all = {
      ...(await agentSecretEnv({ db: deps.db, secretBox }, { userId, startTaskId: null })),
      ...withSecrets,
    };
    if (Object.keys(all).length > 0) {
      const content = request.initial_message.content.map((b) =>
        b.type === "text" ? { ...b, text: maskSecrets(b.text, all) } : b,
      );
      request = { ...request, initial_message: { ...request.initial_message, content } };
    }
  }
  if (withSecrets && !secretBox) throw new Error("startConversation: a start with secrets needs deps.secretBox");
  if (request.llm_model && deps.llmModels && secretBox) {
    await assertModelAllowed({ db: deps.db, secretBox, llmModels: deps.llmModels }, userId, request.llm_model);
  }
  // Fail fast while the connection is down, rather than holding a transaction open for the timeout.
  assertQueueReady(deps);
  const resolved = await resolveStartRequest(deps, userId, request);
  // A start that needs no repository takes a warm row and answers READY, in one round trip
  // (tern_warm_claim: quotas, row, task, conversation, events, first run, outboxes); one with
  // secrets of its own seals them in the claim's transaction. A fresh row proves a worker alive,
  // so the worker directory is read only on a miss. A miss wrote nothing, and the start goes on to
  // the queue. The run's job follows the commit, off the answer's path: the run is committed already.
  const warmSpec = deps.warmSpec;
  if (warmSpec && isWarmClaimable(resolved)) {
    const claiming = performance.now();
    const claimed =
      withSecrets && secretBox
        ? await deps.db.transaction().execute(async (trx) => {
            const warm = await claimWarmStart(trx, deps, userId, resolved, warmSpec);
            if (warm) await storeStartSecrets({ db: trx, secretBox }, warm.task.id, withSecrets);
            return warm;
          })
        : await claimWarmStart(deps.db, deps, userId, resolved, warmSpec);
    if (claimed) {
      countWarmStart(claimed.task, (performance.now() - claiming) / 1000);
      if (claimed.run) void enqueueRun(deps, claimed.run);
      return claimed.task;
    }
  }
  // Accepted all the same (a worker may come), but not silently: the task says what it waits for.
  const noWorker = await noWorkerAlive(deps);
  const task = await deps.db.transaction().execute(async (trx) => {
    await assertStartAllowed(trx, userId, deps.limits);
    const created = await startTasksRepository(trx).create(userId, resolved);
    if (withSecrets && secretBox) await storeStartSecrets({ db: trx, secretBox }, created.id, withSecrets);
    const queued = noWorker ? { ...created, detail: WAITING_FOR_WORKER } : created;
    if (noWorker) {
      await startTasksRepository(trx).noteWaitingForWorker(queued.id);
      deps.logger.warn({ task_id: queued.id }, "start accepted while no worker is alive: it waits for one");
    }
    await withJobQueue(deps, () => enqueue(deps.queues, "conversation.start", { taskId: queued.id }), {
      task_id: queued.id,
    });
    return queued;
  });
  if (noWorker) deps.onStartWaiting?.();
  return task;
};

/** True only when the worker directory answered and named none; a directory that cannot be read says nothing. */
const noWorkerAlive = async (deps: Pick<ServiceDeps, "workersAlive" | "logger">): Promise<boolean> => {
  if (!deps.workersAlive) return false;
  try {
    return (await deps.workersAlive()) === 0;
  } catch (err) {
    deps.logger.warn({ err }, "the worker directory could not be read");
    return false;
  }
};

/**
 * A new job for a start task in flight whose job Redis lost (the janitor's reconciler). Its
 * attempts count on from the task's, so the fencing token keeps growing and a stale worker of the
 * lost job stays refused.
 */
export const requeueStartTask = (
  deps: Pick<ServiceDeps, "queues">,
  task: Pick<StartTask, "id" | "attempt">,
): Promise<string> => enqueue(deps.queues, "conversation.start", { taskId: task.id, attemptBase: task.attempt });
