import { metrics, newEvent, newId, type StartRequest, type StartTask } from "@tern/core";
import { claimWarmStartAtOnce, type Database, type RequestedRun } from "@tern/db";
import type { Kysely } from "kysely";
import type { ServiceDeps } from "../deps.ts";
import { startQuotaError } from "../quotas.ts";
import { openingOf, promptSuffixesOf } from "./open.ts";

/** What the API's warm claim needs besides the services' own deps. */
export interface WarmStartDeps {
  /**
   * The engine-agnostic spec a start asks the warm rows for (the deployment's SANDBOX_IMAGE).
   * Absent: every start goes to the queue.
   */
  warmSpec?: string;
}

/** A start a warm claim served: READY, and its first run when it has an initial message. */
export interface WarmClaimed {
  task: StartTask;
  run: RequestedRun | null;
}

/**
 * A start the API may serve from a warm row in its own transaction: one that needs no repository
 * (the warm sandbox holds the empty workspace and nothing else). A start with one goes to the queue.
 */
export const isWarmClaimable = (request: StartRequest): boolean =>
  !request.selected_repository && !request.sandbox_spec_id;

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

/**
 * The warm claim in one round trip (`tern_warm_claim`): the quotas, a warm row of `spec` (FOR
 * UPDATE SKIP LOCKED), the task READY with its stage history, its sandbox, the conversation opened
 * as the worker's pipeline opens one (tern_open_conversation), its first run (queued) and the
 * webhook outbox, as one statement, in `db`'s transaction (a start with secrets seals them in
 * the same one). The API talks to no engine here: the run's first exec proves the sandbox alive
 * (the worker replaces a dead one). The message is stored as given: the caller masked it with
 * every secret the conversation will have. Null on a miss, having written nothing (the caller
 * goes to the queue); a quota refusal throws.
 */
export const claimWarmStart = async (
  db: Kysely<Database>,
  deps: Pick<ServiceDeps, "secretBox" | "limits">,
  userId: string,
  request: StartRequest,
  spec: string,
): Promise<WarmClaimed | null> => {
  const secretBox = deps.secretBox;
  if (!secretBox) return null;
  const conversationId = request.conversation_id ?? newId();
  const initial = request.initial_message;
  const out = await claimWarmStartAtOnce(db, {
    conversation: openingOf(secretBox, { id: newId(), userId, request }, conversationId),
    llmModel: request.llm_model ?? null,
    first: {
      promptSuffixes: promptSuffixesOf(request),
      systemEventId: newId(),
      // A warm sandbox has no skills, so no skill is triggered by the message.
      userMessage: initial ? { id: newId(), payload: newEvent.userMessage(initial.content, []).payload } : null,
    },
    request,
    spec,
    maxInFlight: deps.limits?.maxStartsInFlightPerUser,
    maxSandboxes: deps.limits?.maxSandboxesPerUser,
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
