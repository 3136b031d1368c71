import {
  type ActionPayload,
  type EventDraft,
  metrics,
  newEvent,
  newId,
  policyFromSettings,
  requiresConfirmation,
} from "@tern/core";
import { type SandboxRef, sandboxFaultOf } from "@tern/sandbox";
import type { RunOutcome } from "./loop.ts";
import { ratePatternRisk } from "./risk.ts";
import type { PendingAction } from "./run-state.ts";
import { agentError, endRun, type RunScope, sandboxPaused } from "./scope.ts";
import { executeTool, type ToolOutcome } from "./tools/execute.ts";
import { isToolName, type ToolName, traitsOf } from "./tools/registry.ts";
import { currentTaskList } from "./tools/task-tracker.ts";
import { interruptedToolResult, stopSignal } from "./tools/terminal/interrupt.ts";

/**
 * The dispatch of a reply's calls. What a live viewer of the events expects decides when their
 * results are written; everything produced together is one write (EventSink.appendStep).
 * - A response's events and its LLM usage: one write, before any of its tools runs (a call's
 *   ActionEvent is stored before it runs: the record a resumed run goes by). The results of its
 *   leading instant calls go with them: they take no time.
 * - Results are held and written together while the calls after them take no noticeable time, and
 *   written before a slow call and before the next LLM call: a viewer sees each result within
 *   milliseconds of its tool ending, never after another long wait.
 */

type ToolRunOptions = { attachMs?: number; signal?: AbortSignal; interruptFirst?: boolean };

const maxOutputBytesOf = (run: RunScope) => run.deps.maxToolOutputBytes ?? 30_000;

const observationOf = (event: { id: string }, payload: ActionPayload, result: ToolOutcome): EventDraft =>
  newEvent.observation({
    tool_name: payload.tool_name,
    tool_call_id: payload.tool_call_id,
    action_id: event.id,
    observation: result.observation,
  });

/** An MCP tool's call (or one whose server this run does not have: its call answers so). */
const runMcpTool = async (run: RunScope, payload: ActionPayload, opts: ToolRunOptions): Promise<ToolOutcome> => {
  const data = (payload.action as { data?: Record<string, unknown> }).data ?? {};
  const text = `The tool ${payload.tool_name} is not available in this run.`;
  if (!run.mcp) {
    return {
      text,
      isError: true,
      observation: {
        kind: "MCPToolObservation",
        tool_name: payload.tool_name,
        content: [{ type: "text", text }],
        is_error: true,
      },
    };
  }
  return run.mcp.call(payload.tool_name, data, {
    maxOutputBytes: maxOutputBytesOf(run),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
};

/** Runs one stored call, built-in or MCP, and times it. */
const runTool = async (
  run: RunScope,
  event: { id: string },
  payload: ActionPayload,
  sandboxRef: SandboxRef | null,
  opts: ToolRunOptions = {},
): Promise<ToolOutcome> => {
  const began = performance.now();
  const seconds = () => (performance.now() - began) / 1000;
  if (!isToolName(payload.tool_name)) {
    const outcome = await runMcpTool(run, payload, opts);
    metrics.toolDuration.observe({ tool: "mcp" }, seconds());
    return outcome;
  }
  const { kind: _kind, ...args } = payload.action;
  const { conversation, store } = run;
  const result = await executeTool(payload.tool_name as ToolName, args as never, {
    sandbox: run.deps.sandboxes,
    sandboxRef: sandboxRef ?? "",
    workspaceDir: conversation.workspaceDir,
    actionId: event.id,
    maxOutputBytes: maxOutputBytesOf(run),
    env: run.context.secrets,
    git: run.deps.git,
    conversation,
    currentTaskList: async () => {
      const latest = await store.latestObservationOf(conversation.id, "task_tracker");
      return latest ? currentTaskList([latest]) : [];
    },
    noChangeTimeoutSeconds: run.deps.settings.TERMINAL_NO_CHANGE_TIMEOUT_SECONDS,
    ...opts,
  });
  metrics.toolDuration.observe({ tool: payload.tool_name }, seconds());
  return result;
};

/**
 * A response's events with the results of its leading instant calls after them; the calls from
 * the first other one on are run by the next turn of the loop, in order, from the stored events.
 */
export const withInstantResults = async (run: RunScope, drafts: EventDraft[]): Promise<EventDraft[]> => {
  const withIds = drafts.map((d) => ({ ...d, id: d.id ?? newId() }));
  const results: EventDraft[] = [];
  for (const d of withIds) {
    if (d.kind !== "ActionEvent") continue; // a bad call: its error is its result
    const payload = d.payload as ActionPayload;
    if (!traitsOf(payload.tool_name).instant) break;
    results.push(observationOf(d, payload, await runTool(run, d, payload, null)));
  }
  return [...withIds, ...results];
};

/**
 * Whether a response's calls wait for the user (confirmation mode): the conversation's own
 * policy, else its user's settings, read now (either may change while the conversation lives).
 * Without a security analyzer the model's risk is not gone by: every call counts as UNKNOWN.
 */
export const mustConfirm = async (run: RunScope, drafts: EventDraft[]): Promise<boolean> => {
  const actions = drafts.flatMap((d) => (d.kind === "ActionEvent" ? [d.payload as ActionPayload] : []));
  if (actions.length === 0) return false;
  const { context, mcp } = run;
  const settings = context.confirmation ?? { confirmationMode: false, securityAnalyzer: "llm" as const };
  const policy = (await run.store.confirmationPolicy(run.conversation.id)) ?? policyFromSettings(settings);
  return requiresConfirmation(
    policy,
    actions.map((a) => ({
      tool_name: a.tool_name,
      security_risk: settings.securityAnalyzer === "none" ? "UNKNOWN" : (a.security_risk ?? "UNKNOWN"),
      always_confirm: (context.alwaysConfirm?.(a.tool_name) ?? false) || (mcp?.alwaysConfirm(a.tool_name) ?? false),
      // The local analyzer's rating beside the model's label: a prompt-injected model says LOW.
      analyzed_risk: ratePatternRisk(a).risk,
    })),
  );
};

/**
 * A call that threw. Interrupted: Ctrl-C to the command, and its result when it comes at once (else
 * it stays pending). Otherwise the one sandbox-fault reaction (sandboxFaultOf): a sandbox that is
 * gone or not running will not come back by retrying, and the run ends; one paused under the call
 * makes the run wait (the call has no result stored, so it runs when the run continues). Anything
 * else (a driver hiccup) is thrown, and the job's retry resumes the run (the held results are of
 * calls run once through the sandbox: the retry reads them back).
 */
const afterToolFailure = async (
  run: RunScope,
  err: unknown,
  call: PendingAction,
  sandboxRef: SandboxRef | null,
  held: EventDraft[],
): Promise<RunOutcome | "interrupted"> => {
  const { deps, log } = run;
  deps.shutdown?.throwIfAborted();
  if (deps.interrupt?.aborted && sandboxRef) {
    const late = await interruptedToolResult(
      () => runTool(run, call.event, call.payload, sandboxRef, { attachMs: 700, interruptFirst: true }),
      (err) => log.warn({ err }, "no result of the interrupted call yet; it stays pending"),
    );
    if (late) held.push(observationOf(call.event, call.payload, late));
    return "interrupted";
  }
  const fault = sandboxRef ? await sandboxFaultOf(deps.sandboxes, sandboxRef) : "gone";
  if (fault === "passing") throw err;
  if (fault === "paused") {
    log.info("sandbox paused during a step; the run waits for it");
    if (held.length > 0) await run.sink.append(held.splice(0));
    return sandboxPaused;
  }
  log.warn({ err, fault }, "sandbox not running");
  const state = fault === "gone" ? "gone" : "not running";
  return endRun(run, "error", [
    ...held,
    agentError(`The conversation's sandbox is ${state}; tools cannot run any more.`),
  ]);
};

/**
 * Runs the calls whose ActionEvent is stored but not their result, in order (a resumed run's
 * recorded calls return their first execution's result: tools/run-once.ts). Null: all ran (or the
 * user interrupted); else how the run ends or waits.
 */
export const runPending = async (
  run: RunScope,
  pending: PendingAction[],
  sandboxRef: SandboxRef | null,
): Promise<RunOutcome | null> => {
  const held: EventDraft[] = [];
  const flush = async () => {
    if (held.length > 0) await run.sink.append(held.splice(0));
  };
  for (const call of pending) {
    const traits = traitsOf(call.payload.tool_name);
    if (traits.needsSandbox && !sandboxRef) {
      return endRun(run, "error", [
        ...held,
        agentError("The conversation's sandbox is gone; tools cannot run any more."),
      ]);
    }
    if (traits.slow || traits.readsStoredEvents) await flush();
    if (run.deps.interrupt?.aborted) break;
    let result: ToolOutcome;
    try {
      result = await runTool(run, call.event, call.payload, sandboxRef, { signal: stopSignal(run.deps) });
    } catch (err) {
      const after = await afterToolFailure(run, err, call, sandboxRef, held);
      if (after === "interrupted") break;
      return after;
    }
    held.push(observationOf(call.event, call.payload, result));
    // Not recorded: its result is the only trace that it ran.
    if (!traits.recorded) await flush();
  }
  await flush();
  return null;
};
