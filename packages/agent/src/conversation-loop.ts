import { EventLimitError, metrics, newEvent, type StoredEvent } from "@tern/core";
import { condense, condenserLimits } from "./condenser/condense.ts";
import { type CondensationReason, condensationReason } from "./condenser/plan.ts";
import { estimateTokens } from "./condenser/tokens.ts";
import { viewOf } from "./condenser/view.ts";
import { runPending } from "./dispatch.ts";
import { priceOf } from "./llm/models.ts";
import { unpricedBudgetError } from "./llm/run-events.ts";
import type { LlmChoiceFacts } from "./llm/select.ts";
import { type LlmClient, LlmContextLengthError, LlmError } from "./llm/types.ts";
import { usageMetrics } from "./llm/usage-metrics.ts";
import type { RunOutcome } from "./loop.ts";
import { analyzeRun, type RunState } from "./run-state.ts";
import { agentError, endRun, type RunScope, sandboxPaused } from "./scope.ts";
import { llmFailed, requestOf, type StepContext, takeStep } from "./step.ts";
import { actionErrorNudge, defaultStuckThresholds, nudgeEvent } from "./stuck-detector.ts";
import { toolDefinitions } from "./tools/definitions.ts";

/**
 * The conversation's loop (OpenHands' LocalConversation.run): limits, pauses, interrupts and
 * condensation around the steps. Every decision is made from the stored events, re-read at each
 * turn (a bounded read, whatever the conversation's length: the latest condensation's kept tail
 * and what came after, the system prompt and the first user message), so a worker that picks the
 * run up after another one died continues where it stopped.
 */

/** What the steps of the run share, once its LLM is chosen; the budget joins the conversation's metrics. */
const stepContextOf = async (run: RunScope, llm: LlmClient, facts: LlmChoiceFacts): Promise<StepContext> => {
  const { deps, context, store, conversation } = run;
  // The tools the conversation's client named (agent-server API), else all of them.
  const named = context.tools;
  const price = priceOf(llm.model, deps.settings.LLM_PRICES);
  const maxBudget = context.maxBudgetPerTask ?? deps.settings.MAX_BUDGET_PER_TASK ?? null;
  // The budget is part of the conversation's MetricsSnapshot.
  const { accumulatedCost } = await run.sink.addMetrics({ set: maxBudget ? { max_budget_per_task: maxBudget } : {} });
  return {
    llm,
    price,
    maxBudget,
    spent: accumulatedCost,
    limits: condenserLimits(llm.model, deps.settings, facts.maxOutputTokens ?? undefined),
    stuckThresholds: {
      ...defaultStuckThresholds,
      monologue: deps.settings.AGENT_STUCK_MONOLOGUE ?? defaultStuckThresholds.monologue,
    },
    tools: named ? toolDefinitions.filter((t) => named.includes(t.name)) : toolDefinitions,
    runStartSeq: (await store.lastRunStartSeq(conversation.id)) ?? 0,
    maxOutputTokens: facts.maxOutputTokens,
    truncatedInARow: 0,
    emptyReplies: 0,
  };
};

/**
 * Condenses the view (condenser/): the summary's call and its CondensationEvent are one step,
 * counted in the metrics and the budget like any other call. False when nothing can be forgotten.
 */
const condenseView = async (
  run: RunScope,
  s: StepContext,
  view: StoredEvent[],
  reason: CondensationReason,
): Promise<boolean> => {
  if (!s.limits) return false;
  const began = performance.now();
  let done: Awaited<ReturnType<typeof condense>>;
  try {
    done = await condense(s.llm, view, reason, s.limits);
  } catch (err) {
    // The summary's own request is too long even with its events cut short: no condensation.
    if (err instanceof LlmContextLengthError) return false;
    throw err;
  }
  if (!done) return false;
  metrics.llmDuration.observe({ model: s.llm.model }, (performance.now() - began) / 1000);
  run.log.info({ reason, forgotten: done.draft.payload.forgotten_event_ids.length }, "history condensed");
  const usage = usageMetrics(s.llm, s.price, done.response.usage);
  s.spent = (await run.sink.appendStep([done.draft], usage)).accumulatedCost;
  return true;
};

/** Condenses for `reason`: true when it did, false when nothing could be; an LLM failure ends the run. */
const condenseOrEnd = async (
  run: RunScope,
  s: StepContext,
  view: StoredEvent[],
  reason: CondensationReason,
): Promise<boolean | RunOutcome> => {
  try {
    return await condenseView(run, s, view, reason);
  } catch (err) {
    if (err instanceof LlmError) return llmFailed(run, err);
    throw err;
  }
};

/**
 * The provider refused the request as too long: condense and try again rather than end the run (a
 * loop of these is the context-error stuck pattern). Null: condensed, go on.
 */
const afterContextError = async (
  run: RunScope,
  s: StepContext,
  view: StoredEvent[],
  err: LlmContextLengthError,
): Promise<RunOutcome | null> => {
  run.log.warn({ err }, "LLM refused the request as too long; condensing");
  const condensed = await condenseOrEnd(run, s, view, "context_error");
  if (condensed === true) return null;
  if (condensed !== false) return condensed;
  return endRun(run, "stuck", [
    agentError(
      "The agent is stuck in a context-error loop: the LLM refused the request as too long, and the " +
        `history cannot be condensed further (${err.message}). (stuck pattern: context_error_loop)`,
    ),
  ]);
};

/** How the run ends before its next step, if it does: done, paused, stuck, or past a limit. */
const limitReached = async (
  run: RunScope,
  s: StepContext,
  state: RunState & { iterations: number; pauseRequested: boolean },
  history: StoredEvent[],
): Promise<RunOutcome | null> => {
  const { deps, context } = run;
  if (deps.interrupt?.aborted) return endRun(run, "paused");
  if (state.done) return endRun(run, "finished");
  if (state.pauseRequested) return endRun(run, "paused");
  if (state.stuck) {
    run.log.info({ pattern: state.stuck.pattern }, "agent stuck");
    return endRun(run, "stuck", [agentError(`${state.stuck.message} (stuck pattern: ${state.stuck.pattern})`)]);
  }
  const maxIterations = Math.min(deps.settings.MAX_ITERATIONS, context.maxIterations ?? deps.settings.MAX_ITERATIONS);
  if (state.iterations >= maxIterations) {
    // As OpenHands ends it: `error`, with the ConversationErrorEvent its clients wait for. The
    // conversation is not over: a follow-up (or POST /run) starts a run with its own count.
    run.log.info({ max_iterations: maxIterations }, "agent reached its maximum iterations");
    return endRun(run, "error", [
      newEvent.conversationError(
        "MaxIterationsReached",
        `Agent reached maximum iterations limit (${maxIterations}). ` +
          "Send a message or POST /run to let it continue from where it stopped.",
      ),
    ]);
  }
  if (s.maxBudget && s.price && (s.spent ?? 0) >= s.maxBudget) {
    return endRun(run, "error", [
      agentError(
        `The conversation reached its budget: it spent $${(s.spent ?? 0).toFixed(4)} of max_budget_per_task ` +
          `$${s.maxBudget}. Raise max_budget_per_task (POST /api/v1/settings) and send a message to continue.`,
      ),
    ]);
  }
  // The answer will be at least one more event: end now rather than spend an LLM call on it.
  const maxEvents = deps.settings.MAX_EVENTS_PER_CONVERSATION || undefined;
  if (maxEvents && (history.at(-1)?.seq ?? 0) >= maxEvents) throw new EventLimitError(maxEvents);
  return null;
};

/** The conversation's loop, to the run's end: pending calls first, then limits, then a step. */
export const conversationLoop = async (run: RunScope, llm: LlmClient, facts: LlmChoiceFacts): Promise<RunOutcome> => {
  const { store, conversation, deps } = run;
  const s = await stepContextOf(run, llm, facts);
  // A budget needs a price: a model without one is refused rather than counted at $0.
  if (s.maxBudget && !s.price) return endRun(run, "error", [agentError(unpricedBudgetError(llm.model, s.maxBudget))]);
  for (;;) {
    // Paused between two steps: stop here, holding the conversation; resume continues this run.
    const sandbox = await store.sandboxOf(conversation);
    if (sandbox.paused) {
      run.log.info("sandbox paused; the run waits for it");
      return sandboxPaused;
    }
    const read = await store.readForAgent(conversation.id);
    const history = read.recent;
    const state = {
      ...analyzeRun(history, s.stuckThresholds),
      ...(await store.runProgress(conversation.id, s.runStartSeq)),
    };
    if (state.pending.length > 0) {
      const stopped = await runPending(run, state.pending, sandbox.ref);
      if (stopped) return stopped;
      if (deps.interrupt?.aborted) return endRun(run, "paused");
      continue;
    }
    const limit = await limitReached(run, s, state, history);
    if (limit) return limit;
    // The same action failed again and again: tell the model once before calling it stuck.
    const nudge = actionErrorNudge(history, s.stuckThresholds);
    if (nudge) {
      await run.sink.append([nudgeEvent(nudge)]);
      continue;
    }
    // The model's view: the stored events with their condensations applied (condenser/view.ts).
    const view = viewOf([...read.head, ...history]);
    const request = requestOf(run, s, view);
    const reason = s.limits ? condensationReason(view, estimateTokens(request), s.limits) : null;
    // Over the limits: condense first, then build the request again from the stored events.
    const condensed = reason ? await condenseOrEnd(run, s, view, reason) : false;
    if (condensed === true) continue;
    if (condensed !== false) return condensed;
    const step = await takeStep(run, s, request, history.at(-1)?.seq ?? 0);
    if (step.next === "end") return step.outcome;
    if (step.next === "too_long") {
      const ended = await afterContextError(run, s, view, step.err);
      if (ended) return ended;
    }
  }
};
