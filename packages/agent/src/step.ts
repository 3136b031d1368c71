import { randomUUID } from "node:crypto";
import { type EventDraft, EventLimitError, metrics, newEvent, type StoredEvent } from "@tern/core";
import type { CondenserLimits } from "./condenser/plan.ts";
import { mustConfirm, withInstantResults } from "./dispatch.ts";
import { buildHistory } from "./history.ts";
import type { ModelPrice } from "./llm/models.ts";
import { MAX_TRUNCATED_IN_A_ROW, reasoningOf, retryWaitEvent, truncatedText } from "./llm/run-events.ts";
import {
  type LlmClient,
  LlmContextLengthError,
  LlmError,
  type LlmRequest,
  type LlmResponse,
  type ToolDefinition,
} from "./llm/types.ts";
import { usageMetrics } from "./llm/usage-metrics.ts";
import type { RunOutcome } from "./loop.ts";
import { agentError, endRun, type RunScope } from "./scope.ts";
import type { MetricsChange } from "./sink.ts";
import { nudgeEvent, type StuckThresholds } from "./stuck-detector.ts";
import { buildSystemPrompt } from "./system-prompt.ts";
import { toolCallEvents } from "./tool-calls.ts";
import { withCallMeta } from "./tools/definitions.ts";
import { stopSignal } from "./tools/terminal/interrupt.ts";

/** What the steps of a run share once its LLM is chosen. */
export interface StepContext {
  llm: LlmClient;
  price: ModelPrice | null;
  /** USD the conversation may spend; null: no cap. */
  maxBudget: number | null;
  /** The conversation's cost so far, as the last write answered it. */
  spent: number | undefined;
  /** The condenser's limits for the model; null: condensation is off. */
  limits: CondenserLimits | null;
  stuckThresholds: StuckThresholds;
  /** The built-in tools offered (those the conversation's client named, else all). */
  tools: ToolDefinition[];
  /** The seq of the event that began the run: its iterations are counted from there. */
  runStartSeq: number;
  /** The output limit each request asks for (null: the server's own). */
  maxOutputTokens: number | null;
  /** Replies cut by length in a row, up to now. */
  truncatedInARow: number;
  /** Empty replies of the model in a row (each is nudged, up to a limit). */
  emptyReplies: number;
}

/** How a step ended: the loop goes on, the run ends, or the request was too long for the provider. */
export type StepResult =
  | { next: "continue" }
  | { next: "end"; outcome: RunOutcome }
  | { next: "too_long"; err: LlmContextLengthError };

/** The request of the next step, from the model's view of the stored events. */
export const requestOf = (run: RunScope, s: StepContext, view: StoredEvent[]): LlmRequest => {
  const { conversation, mcp } = run;
  const { system, messages } = buildHistory(view, conversation.skills, { dir: conversation.workspaceDir });
  return {
    system:
      system ??
      buildSystemPrompt({
        workspaceDir: conversation.workspaceDir,
        repository: conversation.selectedRepository,
        skills: conversation.skills,
        llmModel: conversation.llmModel,
      }),
    messages,
    // MCP tools are asked for security_risk and summary too, as every tool is.
    tools: mcp
      ? [...s.tools, ...mcp.definitions.map((d) => ({ ...d, parameters: withCallMeta(d.parameters) }))]
      : s.tools,
    cacheKey: conversation.id,
  };
};

/** An LLM call that failed for good: the run ends in error with the provider's reason. */
export const llmFailed = (run: RunScope, err: LlmError): Promise<RunOutcome> => {
  run.log.warn({ err, status: err.status }, "LLM call failed");
  return endRun(run, "error", [agentError(`${err.message}${err.status ? ` (HTTP ${err.status})` : ""}`)]);
};

const observeCall = (llm: LlmClient, began: number, response: LlmResponse) => {
  const model = llm.model;
  metrics.llmDuration.observe({ model }, (performance.now() - began) / 1000);
  metrics.llmTokens.inc({ model, kind: "prompt" }, response.usage.promptTokens);
  metrics.llmTokens.inc({ model, kind: "completion" }, response.usage.completionTokens);
};

/** Empty replies in a row the model is nudged after; one more ends the run. */
const MAX_EMPTY_REPLY_NUDGES = 2;

const emptyReplyNudge =
  "Your last reply was empty: no text and no tool call. Continue with the task: call a tool, or, if the task " +
  "is done, call finish with a short summary.";

/**
 * A reply with neither text nor a call is no answer (it would end the run as `finished`): the model
 * is nudged, at most twice in a row, and its usage counted; a third ends the run in error.
 */
const emptyReply = async (run: RunScope, s: StepContext, usage: MetricsChange): Promise<StepResult> => {
  s.emptyReplies += 1;
  if (s.emptyReplies > MAX_EMPTY_REPLY_NUDGES) {
    run.log.warn({ replies: s.emptyReplies }, "the model keeps replying with nothing; the run ends");
    const error = agentError(
      `The model replied with nothing (no text, no tool call) ${s.emptyReplies} times in a row, after ` +
        `${MAX_EMPTY_REPLY_NUDGES} reminders. Send a message to let it try again.`,
    );
    return { next: "end", outcome: await endRun(run, "error", [error], usage) };
  }
  run.log.info({ replies: s.emptyReplies }, "empty reply from the model; nudging it");
  s.spent = (await run.sink.appendStep([nudgeEvent(emptyReplyNudge)], usage)).accumulatedCost;
  return { next: "continue" };
};

/**
 * The dispatch of a reply: its calls (or its message) and its usage in one write; calls that wait
 * for the user's confirmation end the run, stored and not run. `historySeq`: what the model had
 * seen (a user message stored after it is still unanswered).
 */
const dispatchReply = async (
  run: RunScope,
  s: StepContext,
  response: LlmResponse,
  historySeq: number,
): Promise<StepResult> => {
  const usage = usageMetrics(s.llm, s.price, response.usage);
  // Our own id, not the provider's: a provider may repeat ids, and the grouping must be exact.
  const responseId = randomUUID();
  const calls =
    response.toolCalls.length === 0
      ? []
      : toolCallEvents(response, responseId, historySeq, run.mcp ?? undefined, s.tools);
  if (await mustConfirm(run, calls)) {
    // Stored, none run: the run ends here and holds nothing while the user decides; the answer
    // asks for a new run (services: respondToConfirmation).
    run.log.info({ calls: calls.length }, "tool calls wait for the user's confirmation");
    return { next: "end", outcome: await endRun(run, "waiting_for_confirmation", calls, usage) };
  }
  if (response.toolCalls.length === 0 && response.text.trim() === "") return emptyReply(run, s, usage);
  s.emptyReplies = 0;
  const drafts: EventDraft[] =
    response.toolCalls.length === 0
      ? [
          newEvent.agentMessage(
            response.text,
            { llm_response_id: responseId, history_seq: historySeq },
            reasoningOf(response),
          ),
        ]
      : await withInstantResults(run, calls);
  try {
    s.spent = (await run.sink.appendStep(drafts, usage)).accumulatedCost;
  } catch (err) {
    // The conversation is full: the call was made and paid for all the same.
    if (err instanceof EventLimitError) await run.sink.addMetrics(usage);
    throw err;
  }
  return { next: "continue" };
};

/**
 * A reply cut by the output limit: never run (its calls may be cut mid-argument). Its usage counts;
 * the model is told and asked to go on in smaller pieces, and the run ends if it keeps overrunning.
 */
const truncatedReply = async (run: RunScope, s: StepContext, response: LlmResponse): Promise<StepResult> => {
  const usage = usageMetrics(s.llm, s.price, response.usage);
  s.truncatedInARow++;
  run.log.warn({ stop_reason: response.stopReason, in_a_row: s.truncatedInARow }, "LLM reply cut by length; not run");
  if (s.truncatedInARow > MAX_TRUNCATED_IN_A_ROW) {
    const error =
      `The model's replies were cut off at the output limit ${s.truncatedInARow} times in a row, so none was run. ` +
      "Raise LLM_MAX_OUTPUT_TOKENS or ask for smaller steps, and send a message to continue.";
    return { next: "end", outcome: await endRun(run, "error", [agentError(error)], usage) };
  }
  s.spent = (
    await run.sink.appendStep([nudgeEvent(truncatedText(response, s.maxOutputTokens))], usage)
  ).accumulatedCost;
  return { next: "continue" };
};

/** One step: one model call and the dispatch of its reply. */
export const takeStep = async (
  run: RunScope,
  s: StepContext,
  request: LlmRequest,
  historySeq: number,
): Promise<StepResult> => {
  const { deps } = run;
  metrics.agentSteps.inc();
  const began = performance.now();
  let response: LlmResponse;
  try {
    response = await s.llm.complete(request, stopSignal(deps), {
      // Each wait for a retry is shown before it begins (the page: "the model is rate-limited; retrying in 32 s").
      onRetryWait: async (wait) => {
        run.log.warn({ reason: wait.reason, status: wait.status, wait_ms: wait.waitMs }, "LLM call failed; retrying");
        await run.sink.append([retryWaitEvent(wait)]);
      },
    });
  } catch (err) {
    deps.shutdown?.throwIfAborted();
    // Interrupted: the call's answer is dropped, nothing of it stored.
    if (deps.interrupt?.aborted) return { next: "end", outcome: await endRun(run, "paused") };
    if (!(err instanceof LlmError)) throw err;
    if (err instanceof LlmContextLengthError && s.limits) return { next: "too_long", err };
    return { next: "end", outcome: await llmFailed(run, err) };
  }
  observeCall(s.llm, began, response);
  if (response.truncated) return truncatedReply(run, s, response);
  s.truncatedInARow = 0;
  return dispatchReply(run, s, response, historySeq);
};
