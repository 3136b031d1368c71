import { randomUUID } from "node:crypto";
import {
  type ActionPayload,
  type Conversation,
  type EventDraft,
  type EventDraftOf,
  EventLimitError,
  type ExecutionStatus,
  type Logger,
  type McpConfig,
  maskSecrets,
  mcpTransportOf,
  metrics,
  newEvent,
  newId,
  policyFromSettings,
  requiresConfirmation,
  type SecurityAnalyzer,
  type StoredEvent,
} from "@tern/core";
import {
  agentRunsRepository,
  confirmationsRepository,
  conversationsRepository,
  type Database,
  eventsRepository,
  type MetricsChange,
  type RunLease,
  RunLeaseLostError,
  sandboxesRepository,
} from "@tern/db";
import type { SandboxDriver, SandboxRef } from "@tern/sandbox";
import type { Kysely } from "kysely";
import type { z } from "zod";
import { type CondenserSettings, condense, condenserLimits } from "./condenser/condense.ts";
import { type CondensationReason, condensationReason } from "./condenser/plan.ts";
import { estimateTokens } from "./condenser/tokens.ts";
import { viewOf } from "./condenser/view.ts";
import { buildHistory } from "./history.ts";
import { type PriceTable, priceOf } from "./llm/prices.ts";
import { chooseLlm, type LlmClientOptions, type LlmSettings, type UserLlmSettings } from "./llm/select.ts";
import {
  type LlmClient,
  LlmContextLengthError,
  LlmError,
  type LlmRequest,
  type LlmResponse,
  type ToolCall,
  type ToolDefinition,
} from "./llm/types.ts";
import { usageMetrics } from "./llm/usage-metrics.ts";
import { connectMcpServers, type McpSettings, type McpToolSet } from "./mcp/session.ts";
import { analyzeRun } from "./run-state.ts";
import { actionErrorNudge, defaultStuckThresholds, nudgeEvent, type StuckThresholds } from "./stuck-detector.ts";
import { buildSystemPrompt } from "./system-prompt.ts";
import {
  isToolName,
  type ToolName,
  takeCallMeta,
  toolArgs,
  toolDefinitions,
  withCallMeta,
} from "./tools/definitions.ts";
import { executeTool, type ToolOutcome } from "./tools/execute.ts";
import type { GitToolRunner } from "./tools/git.ts";
import { currentTaskList } from "./tools/task-tracker.ts";
import { interruptedToolResult, stopSignal } from "./tools/terminal/interrupt.ts";

/** What a run takes from its conversation's user: called once per run, holding the conversation. */
export interface AgentRunContext {
  /**
   * Name → value: environment variables of the agent's commands (the user's secrets and the start
   * request's), and masked as `<secret:NAME>` in every event the run stores and every error it throws.
   */
  secrets: Record<string, string>;
  /** The user's own LLM settings (null: none; the operator's LLM serves them). */
  llm: UserLlmSettings | null;
  /** The user's max_iterations (at most MAX_ITERATIONS); null: MAX_ITERATIONS. */
  maxIterations: number | null;
  /** The user's max_budget_per_task (USD); null: MAX_BUDGET_PER_TASK. */
  maxBudgetPerTask: number | null;
  /** The user's confirmation_mode and security_analyzer; absent: confirmation mode off. */
  confirmation?: { confirmationMode: boolean; securityAnalyzer: SecurityAnalyzer };
  /**
   * Tools whose every call waits for the user's confirmation, whatever the policy, beside the
   * tools of MCP servers marked `confirm: "always"` (McpToolSet.alwaysConfirm). Asked of every
   * ActionEvent of a response.
   */
  alwaysConfirm?: (toolName: string) => boolean;
  /** The user's MCP servers (settings' mcp_config, opened); absent or null: none. */
  mcpConfig?: McpConfig | null;
  /**
   * The only built-in tools offered (a conversation whose client named its tools: the agent-server
   * API, issue 21); absent or null: all of them. A call of another is an error the model reads.
   */
  tools?: readonly string[] | null;
}

export interface AgentRunDeps {
  db: Kysely<Database>;
  /** `openProcess`: stdio MCP servers in the sandbox (a driver without it leaves them out). */
  sandboxes: Pick<SandboxDriver, "exec" | "upload" | "inspect" | "openProcess">;
  settings: LlmSettings &
    CondenserSettings &
    McpSettings & {
      MAX_ITERATIONS: number;
      /** Talk-only responses in a row that make a monologue (stuck); 0: off (default 6). */
      AGENT_STUCK_MONOLOGUE?: number;
      /** The run ends in error rather than take the conversation past this many events (0 or absent: no cap). */
      MAX_EVENTS_PER_CONVERSATION?: number;
      /** USD a conversation may spend on the LLM (absent: no cap unless the user set one). */
      MAX_BUDGET_PER_TASK?: number | undefined;
      /** Prices added to the built-in table (LLM_PRICES). */
      LLM_PRICES?: PriceTable;
      /** Seconds a terminal command may print nothing before its call returns (default 30). */
      TERMINAL_NO_CHANGE_TIMEOUT_SECONDS?: number;
    };
  /**
   * The user's interrupt (POST /interrupt): the LLM call in flight is cancelled, the running
   * command gets Ctrl-C, and the run ends `paused` at once (tools/terminal/interrupt.ts).
   */
  interrupt?: AbortSignal;
  /** The worker is stopping: waits on the LLM and the sandbox end now; the run is handed back. */
  shutdown?: AbortSignal;
  /** The user's secrets, LLM and limits for this run (the worker reads and opens them); none: no user part. */
  runContext?: (conversation: Conversation) => Promise<AgentRunContext>;
  /**
   * Called once the run holds the conversation, before its first step: makes sure the sandbox can
   * run tools (the worker resumes one the janitor paused for idleness). No pause can come between
   * it and the run's steps, since the janitor leaves conversations with a run alone.
   */
  ensureSandboxRunning?: (conversation: Conversation) => Promise<void>;
  logger: Logger;
  llmOptions?: LlmClientOptions;
  /** Output kept per tool call (default 30 000 bytes). */
  maxToolOutputBytes?: number;
  /** Runs the git tools (push, pull request) outside the sandbox, with the user's token. */
  git?: GitToolRunner;
}

export type RunOutcome =
  | { outcome: "ended"; status: ExecutionStatus }
  /** Another run holds the conversation; try again once it ends. */
  | { outcome: "busy"; activeRunId: string }
  /** Nothing to do: the run already ended, there is nothing to answer, or the conversation is gone. */
  | { outcome: "skipped"; reason: string }
  /** This worker lost the run to another attempt; it stops without writing. */
  | { outcome: "lost" }
  /**
   * The conversation's sandbox is paused: the run stops where it is, holding the conversation,
   * and the same run continues once the sandbox is resumed (ask again later).
   */
  | { outcome: "waiting"; reason: string };

const actionKinds: Record<ToolName, string> = {
  terminal: "TerminalAction",
  file_editor: "FileEditorAction",
  think: "ThinkAction",
  finish: "FinishAction",
  git_push: "GitPushAction",
  create_pull_request: "CreatePullRequestAction",
  task_tracker: "TaskTrackerAction",
  invoke_skill: "InvokeSkillAction",
};

const agentError = newEvent.agentError;

/**
 * What a live viewer of the events expects decides when a step's events are written; everything
 * produced together is one write (agentRunsRepository.appendStep: one transaction).
 * - A response's events (actions, messages, bad calls) and its LLM usage: one write, before any of
 *   its tools runs (a call's ActionEvent is stored before it runs: the record a resumed run goes by).
 *   The results of its leading `think` and `finish` calls go with them: they take no time.
 * - Results are held and written together while the calls after them take no noticeable time
 *   (file_editor, think, finish), and written before a call that can run for minutes (below), and
 *   before the next LLM call: a viewer sees each result within milliseconds of its tool ending,
 *   never after another long wait.
 */
const slowTools: ReadonlySet<string> = new Set<ToolName>(["terminal", "git_push", "create_pull_request"]);
/**
 * Tools not run once through the sandbox's record (they run on the worker): their result is the
 * only trace that they ran, so it is stored the moment it exists, never held.
 */
const unrecordedTools: ReadonlySet<string> = new Set<ToolName>(["git_push", "create_pull_request"]);
/** Tools that touch nothing and take no time: their result is written with the call itself. */
const instantTools: ReadonlySet<string> = new Set<ToolName>(["think", "finish"]);
/** Tools run on the worker from what is stored: no sandbox needed. */
const workerTools: ReadonlySet<string> = new Set<ToolName>([
  "think",
  "finish",
  "create_pull_request",
  "task_tracker",
  "invoke_skill",
]);

const issuesText = (error: z.ZodError): string =>
  error.issues.map((i) => `${i.path.length ? `${i.path.join(".")}: ` : ""}${i.message}`).join("; ");

/** Some OpenAI-compatible servers send calls without ids, or the same id twice: every call needs its own. */
const withUniqueIds = (calls: ToolCall[]): ToolCall[] => {
  const seen = new Set<string>();
  return calls.map((c) => {
    const id = c.id && !seen.has(c.id) ? c.id : `call_${randomUUID().replaceAll("-", "")}`;
    seen.add(id);
    return id === c.id ? c : { ...c, id };
  });
};

/** One event per tool call of a response: an ActionEvent, or an AgentErrorEvent the model will read. */
export const toolCallEvents = (
  response: LlmResponse,
  responseId: string,
  historySeq: number,
  mcp?: Pick<McpToolSet, "has" | "definitions" | "argumentNames">,
  builtIn: readonly ToolDefinition[] = toolDefinitions,
): EventDraftOf<"ActionEvent" | "AgentErrorEvent">[] =>
  withUniqueIds(response.toolCalls).map((call: ToolCall, i) => {
    const thought = i === 0 && response.text ? [{ type: "text" as const, text: response.text }] : [];
    const fail = (error: string) =>
      newEvent.toolCallError({
        tool_name: call.name,
        tool_call_id: call.id,
        tool_call: call,
        llm_response_id: responseId,
        history_seq: historySeq,
        thought,
        error,
      });
    const isMcp = mcp?.has(call.name) === true;
    if ((!isToolName(call.name) || !builtIn.some((t) => t.name === call.name)) && !isMcp) {
      const names = [...builtIn, ...(mcp?.definitions ?? [])].map((t) => t.name);
      return fail(`Unknown tool "${call.name}". The tools are: ${names.join(", ")}.`);
    }
    let raw: unknown;
    try {
      raw = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
    } catch (err) {
      return fail(`The arguments of ${call.name} are not valid JSON (${(err as Error).message}). Send a JSON object.`);
    }
    // security_risk and summary are every call's, not the tool's: taken off before its schema checks
    // (an MCP tool whose own schema declares one keeps it, and it is read from there).
    const meta =
      raw && typeof raw === "object" && !Array.isArray(raw)
        ? takeCallMeta(call.name, raw as Record<string, unknown>, isMcp ? mcp?.argumentNames(call.name) : undefined)
        : { security_risk: "UNKNOWN" as const, summary: `${call.name}: ${call.arguments}`.slice(0, 500) };
    if (isMcp || !isToolName(call.name)) {
      // An MCP tool's arguments go to its server as they are (OpenHands' MCPToolAction.data); the
      // server checks them against its schema and says what is wrong.
      if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
        return fail(`The arguments of ${call.name} must be a JSON object.`);
      }
      return newEvent.action({
        tool_name: call.name,
        tool_call_id: call.id,
        thought,
        action: { kind: "MCPToolAction", data: raw as Record<string, unknown> },
        tool_call: call,
        llm_response_id: responseId,
        history_seq: historySeq,
        ...meta,
      });
    }
    const parsed = toolArgs[call.name].safeParse(raw);
    if (!parsed.success) return fail(`Invalid arguments for ${call.name}: ${issuesText(parsed.error)}.`);
    return newEvent.action({
      tool_name: call.name,
      tool_call_id: call.id,
      thought,
      action: { kind: actionKinds[call.name], ...parsed.data },
      tool_call: call,
      llm_response_id: responseId,
      history_seq: historySeq,
      ...meta,
    });
  });

const observationOf = (event: { id: string }, payload: ActionPayload, result: ToolOutcome): EventDraft =>
  newEvent.observation({
    tool_name: payload.tool_name,
    tool_call_id: payload.tool_call_id,
    action_id: event.id,
    observation: result.observation,
  });

/**
 * The conversation's sandbox as the driver knows it (ref null when it is gone: removed, or never
 * made), and whether the user paused it.
 */
const sandboxOf = async (
  db: Kysely<Database>,
  conversation: Conversation,
): Promise<{ ref: SandboxRef | null; paused: boolean }> => {
  if (!conversation.sandboxId) return { ref: null, paused: false };
  const sandbox = await sandboxesRepository(db).get(conversation.sandboxId);
  if (!sandbox || sandbox.status === "MISSING" || sandbox.status === "ERROR") return { ref: null, paused: false };
  // Paused by the janitor for idleness, the run resumes it (ensureSandboxRunning); paused by the
  // user (POST /sandboxes/{id}/pause), the run waits until the user resumes it.
  return { ref: sandbox.ref ?? sandbox.name, paused: sandbox.status === "PAUSED" && !sandbox.idlePausedAt };
};

/** Every string inside `value` with the secrets' values masked (events are JSON: walk, not stringify). */
const maskDeep = <T>(value: T, secrets: Record<string, string>): T => {
  if (typeof value === "string") return maskSecrets(value, secrets) as T;
  if (Array.isArray(value)) return value.map((v) => maskDeep(v, secrets)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskDeep(v, secrets)])) as T;
  }
  return value;
};

const noContext: AgentRunContext = { secrets: {}, llm: null, maxIterations: null, maxBudgetPerTask: null };

const sandboxPaused: RunOutcome = { outcome: "waiting", reason: "the conversation's sandbox is paused" };

/**
 * One run of the agent on a conversation. Every decision is made from the stored events, re-read
 * at each step (a bounded read, whatever the conversation's length: the latest condensation's kept
 * tail and what came after, the system prompt and the first user message), so a worker that
 * picks the run up after another one died continues where it stopped: a call whose ActionEvent is stored but not its ObservationEvent is run through the
 * sandbox's run-once record (tools/run-once.ts), which returns the first execution's result.
 */
export const runAgent = async (deps: AgentRunDeps, conversationId: string, runId: string): Promise<RunOutcome> => {
  const log = deps.logger.child({ conversation_id: conversationId, run_id: runId });
  const conversations = conversationsRepository(deps.db);
  const events = eventsRepository(deps.db);
  const runs = agentRunsRepository(deps.db);
  const confirmations = confirmationsRepository(deps.db);

  const conversation = await conversations.get(conversationId);
  if (!conversation) return { outcome: "skipped", reason: "no such conversation" };

  const maxEvents = deps.settings.MAX_EVENTS_PER_CONVERSATION || undefined;

  // Cheap check first: a run waiting for another one is asked again every second or so.
  const holder = await runs.activeRun(conversationId);
  if (holder && holder !== runId) return { outcome: "busy", activeRunId: holder };
  // A new run with nothing to answer writes nothing (e.g. a second /run after the agent finished).
  if (holder !== runId && !analyzeRun((await events.readForAgent(conversationId)).recent).needsAgent) {
    return { outcome: "skipped", reason: "nothing to answer" };
  }
  // While the sandbox is paused a run waits, and does so before it takes (or takes again) the
  // lock: looking again every few seconds then costs no attempt and writes nothing.
  if ((await sandboxOf(deps.db, conversation)).paused) return sandboxPaused;

  const begun = await runs.begin(conversationId, runId);
  if (begun.outcome === "busy") return { outcome: "busy", activeRunId: begun.activeRunId };
  if (begun.outcome === "ended") return { outcome: "skipped", reason: "run already ended" };
  if (begun.outcome === "waiting_for_confirmation") {
    return { outcome: "skipped", reason: "tool calls wait for the user's confirmation" };
  }
  if (begun.outcome === "missing") return { outcome: "skipped", reason: "no such conversation" };
  const lease: RunLease = begun.lease;
  log.info({ outcome: begun.outcome, attempt: lease.attempt }, "agent run taken");

  // Filled once the run holds the conversation; until then nothing secret is in play.
  let context: AgentRunContext = noContext;
  // The user's MCP servers for this run, connected once it holds the conversation.
  let mcp: McpToolSet | null = null;
  const maskedValues = () => (mcp ? { ...mcp.maskValues, ...context.secrets } : context.secrets);
  const masked = <T>(value: T): T => (Object.keys(maskedValues()).length ? maskDeep(value, maskedValues()) : value);
  const append = (drafts: EventDraft[]) => runs.append(lease, masked(drafts), { maxEvents });

  const end = async (
    status: ExecutionStatus,
    drafts: EventDraft[] = [],
    opts: { metrics?: MetricsChange } = {},
  ): Promise<RunOutcome> => {
    await runs.end(lease, status, masked(drafts), opts);
    log.info({ status }, "agent run ended");
    return { outcome: "ended", status };
  };

  const maxIterations = () =>
    Math.min(deps.settings.MAX_ITERATIONS, context.maxIterations ?? deps.settings.MAX_ITERATIONS);
  const budget = () => context.maxBudgetPerTask ?? deps.settings.MAX_BUDGET_PER_TASK ?? null;

  const runTool = async (
    event: { id: string },
    payload: ActionPayload,
    sandboxRef: SandboxRef | null,
    opts: { attachMs?: number; signal?: AbortSignal; interruptFirst?: boolean } = {},
  ): Promise<ToolOutcome> => {
    const { kind: _kind, ...args } = payload.action;
    const began = performance.now();
    if (!isToolName(payload.tool_name)) {
      // An MCP tool (or one whose server this run does not have: its call answers so).
      const data = (payload.action as { data?: Record<string, unknown> }).data ?? {};
      const unavailable: ToolOutcome = {
        text: `The tool ${payload.tool_name} is not available in this run.`,
        isError: true,
        observation: {
          kind: "MCPToolObservation",
          tool_name: payload.tool_name,
          content: [{ type: "text", text: `The tool ${payload.tool_name} is not available in this run.` }],
          is_error: true,
        },
      };
      const outcome = mcp
        ? await mcp.call(payload.tool_name, data, {
            maxOutputBytes: deps.maxToolOutputBytes ?? 30_000,
            ...(opts.signal ? { signal: opts.signal } : {}),
          })
        : unavailable;
      metrics.toolDuration.observe({ tool: "mcp" }, (performance.now() - began) / 1000);
      return outcome;
    }
    const result = await executeTool(payload.tool_name as ToolName, args as never, {
      sandbox: deps.sandboxes,
      sandboxRef: sandboxRef ?? "",
      workspaceDir: conversation.workspaceDir,
      actionId: event.id,
      maxOutputBytes: deps.maxToolOutputBytes ?? 30_000,
      env: context.secrets,
      git: deps.git,
      conversation,
      currentTaskList: async () => {
        const latest = await events.latestObservationOf(conversationId, "task_tracker");
        return latest ? currentTaskList([latest]) : [];
      },
      noChangeTimeoutSeconds: deps.settings.TERMINAL_NO_CHANGE_TIMEOUT_SECONDS,
      ...opts,
    });
    metrics.toolDuration.observe({ tool: payload.tool_name }, (performance.now() - began) / 1000);
    return result;
  };

  /**
   * A response's events with the results of its leading instant calls (think, finish) after them;
   * the calls from the first other one on are run by the next step, in order, from the stored events.
   */
  const withInstantResults = async (drafts: EventDraft[]): Promise<EventDraft[]> => {
    const withIds = drafts.map((d) => ({ ...d, id: d.id ?? newId() }));
    const results: EventDraft[] = [];
    for (const d of withIds) {
      if (d.kind !== "ActionEvent") continue; // a bad call: its error is its result
      const payload = d.payload as ActionPayload;
      if (!instantTools.has(payload.tool_name)) break;
      results.push(observationOf(d, payload, await runTool(d, payload, null)));
    }
    return [...withIds, ...results];
  };

  /**
   * Whether a response's calls wait for the user (confirmation mode): the conversation's own
   * policy, else its user's settings, read now (either may change while the conversation lives).
   * Without a security analyzer the model's risk is not gone by: every call counts as UNKNOWN.
   */
  const mustConfirm = async (drafts: EventDraft[]): Promise<boolean> => {
    const actions = drafts.flatMap((d) => (d.kind === "ActionEvent" ? [d.payload as ActionPayload] : []));
    if (actions.length === 0) return false;
    const settings = context.confirmation ?? { confirmationMode: false, securityAnalyzer: "llm" as const };
    const policy = (await confirmations.policy(conversationId)) ?? policyFromSettings(settings);
    return requiresConfirmation(
      policy,
      actions.map((a) => ({
        tool_name: a.tool_name,
        security_risk: settings.securityAnalyzer === "none" ? "UNKNOWN" : (a.security_risk ?? "UNKNOWN"),
        always_confirm: (context.alwaysConfirm?.(a.tool_name) ?? false) || (mcp?.alwaysConfirm(a.tool_name) ?? false),
      })),
    );
  };

  const steps = async (llm: LlmClient): Promise<RunOutcome> => {
    // The tools the conversation's client named (agent-server API), else all of them.
    const named = context.tools;
    const builtInTools = named ? toolDefinitions.filter((t) => named.includes(t.name)) : toolDefinitions;
    const price = priceOf(llm.model, deps.settings.LLM_PRICES);
    const maxBudget = budget();
    // The budget is part of the conversation's MetricsSnapshot.
    let spent = (
      await conversations.addMetrics(conversationId, {}, maxBudget ? { max_budget_per_task: maxBudget } : {})
    )?.accumulated_cost;
    if (maxBudget && !price) log.warn({ model: llm.model }, "no price for the model: its budget cannot be held");
    const runStartSeq = (await events.lastRunStartSeq(conversationId)) ?? 0;
    const limits = condenserLimits(llm.model, deps.settings, deps.llmOptions?.maxTokens);
    const stuckThresholds: StuckThresholds = {
      ...defaultStuckThresholds,
      monologue: deps.settings.AGENT_STUCK_MONOLOGUE ?? defaultStuckThresholds.monologue,
    };
    /**
     * Condenses the view (condenser/): the summary's call and its CondensationEvent are one step,
     * counted in the metrics and the budget like any other call. False when nothing can be forgotten.
     */
    const condenseView = async (view: StoredEvent[], reason: CondensationReason): Promise<boolean> => {
      if (!limits) return false;
      const began = performance.now();
      let done: Awaited<ReturnType<typeof condense>>;
      try {
        done = await condense(llm, view, reason, limits);
      } catch (err) {
        // The summary's own request is too long even with its events cut short: no condensation.
        if (err instanceof LlmContextLengthError) return false;
        throw err;
      }
      if (!done) return false;
      metrics.llmDuration.observe({ model: llm.model }, (performance.now() - began) / 1000);
      log.info({ reason, forgotten: done.draft.payload.forgotten_event_ids.length }, "history condensed");
      const usage = usageMetrics(llm, price, done.response.usage);
      spent = (await runs.appendStep(lease, masked([done.draft]), { maxEvents, metrics: usage })).metrics
        .accumulated_cost;
      return true;
    };
    for (;;) {
      // Paused between two steps: stop here, holding the conversation; resume continues this run.
      const sandbox = await sandboxOf(deps.db, conversation);
      if (sandbox.paused) {
        log.info("sandbox paused; the run waits for it");
        return sandboxPaused;
      }
      // A bounded read: what the model is shown (the head, the latest condensation's kept tail and
      // what came after), and the run's length and pause counted by the database.
      const read = await events.readForAgent(conversationId);
      const history = read.recent;
      const state = {
        ...analyzeRun(history, stuckThresholds),
        ...(await events.runProgress(conversationId, runStartSeq)),
      };

      if (state.pending.length > 0) {
        const sandboxRef = sandbox.ref;
        const held: EventDraft[] = [];
        const flush = async () => {
          if (held.length > 0) await append(held.splice(0));
        };
        for (const { event, payload } of state.pending) {
          // MCP tools run from the worker (remote) or say themselves that their sandbox is gone (stdio).
          const isMcp = !isToolName(payload.tool_name);
          const needsSandbox = !workerTools.has(payload.tool_name) && !isMcp;
          if (needsSandbox && !sandboxRef) {
            return await end("error", [
              ...held,
              agentError("The conversation's sandbox is gone; tools cannot run any more."),
            ]);
          }
          // task_tracker reads the plan from the stored events: a plan held here is stored first.
          if (slowTools.has(payload.tool_name) || payload.tool_name === "task_tracker" || isMcp) await flush();
          if (deps.interrupt?.aborted) break;
          let result: Awaited<ReturnType<typeof executeTool>>;
          try {
            result = await runTool(event, payload, sandboxRef, { signal: stopSignal(deps) });
          } catch (err) {
            deps.shutdown?.throwIfAborted();
            if (deps.interrupt?.aborted && sandboxRef) {
              // Ctrl-C to the command, and its result when it comes at once; else it stays pending.
              const late = await interruptedToolResult(
                () => runTool(event, payload, sandboxRef, { attachMs: 700, interruptFirst: true }),
                (err) => log.warn({ err }, "no result of the interrupted call yet; it stays pending"),
              );
              if (late) held.push(observationOf(event, payload, late));
              break;
            }
            // A sandbox that is gone or stopped will not come back by retrying: end the run.
            // Anything else (a driver hiccup) is thrown, and the job's retry resumes the run (the
            // held results are of calls run once through the sandbox: the retry reads them back).
            const info = sandboxRef ? await deps.sandboxes.inspect(sandboxRef).catch(() => undefined) : null;
            if (info === undefined || info?.state === "running") throw err;
            // Paused after the step began (a new command is refused by a frozen sandbox): the call
            // has no result stored, so it runs when the run continues.
            if (info?.state === "paused") {
              log.info("sandbox paused during a step; the run waits for it");
              await flush();
              return sandboxPaused;
            }
            log.warn({ err, state: info?.state ?? "missing" }, "sandbox not running");
            return await end("error", [
              ...held,
              agentError(
                `The conversation's sandbox is ${info ? `not running (${info.state})` : "gone"}; tools cannot run any more.`,
              ),
            ]);
          }
          held.push(observationOf(event, payload, result));
          // An MCP call has no run-once record: its result is the only trace that it ran.
          if (unrecordedTools.has(payload.tool_name) || isMcp) await flush();
        }
        await flush();
        if (deps.interrupt?.aborted) return await end("paused");
        continue;
      }
      if (deps.interrupt?.aborted) return await end("paused");

      if (state.done) return await end("finished");
      if (state.pauseRequested) return await end("paused");
      if (state.stuck) {
        log.info({ pattern: state.stuck.pattern }, "agent stuck");
        return await end("stuck", [agentError(`${state.stuck.message} (stuck pattern: ${state.stuck.pattern})`)]);
      }
      if (state.iterations >= maxIterations()) {
        return await end("error", [
          agentError(
            `The agent reached its maximum of ${maxIterations()} iterations (LLM calls) in this run without finishing. ` +
              "Send a message or POST /run to let it continue.",
          ),
        ]);
      }
      if (maxBudget && price && (spent ?? 0) >= maxBudget) {
        return await end("error", [
          agentError(
            `The conversation reached its budget: it spent $${(spent ?? 0).toFixed(4)} of max_budget_per_task ` +
              `$${maxBudget}. Raise max_budget_per_task (POST /api/v1/settings) and send a message to continue.`,
          ),
        ]);
      }

      // The answer will be at least one more event: end now rather than spend an LLM call on it.
      if (maxEvents && (history.at(-1)?.seq ?? 0) >= maxEvents) throw new EventLimitError(maxEvents);
      // The same action failed again and again: tell the model once before calling it stuck.
      const nudge = actionErrorNudge(history, stuckThresholds);
      if (nudge) {
        await append([nudgeEvent(nudge)]);
        continue;
      }
      // The model's view: the stored events with their condensations applied (condenser/view.ts).
      const view = viewOf([...read.head, ...history]);
      const { system, messages } = buildHistory(view, conversation.skills, { dir: conversation.workspaceDir });
      const request: LlmRequest = {
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
          ? [...builtInTools, ...mcp.definitions.map((d) => ({ ...d, parameters: withCallMeta(d.parameters) }))]
          : builtInTools,
        cacheKey: conversationId,
      };
      const llmFailed = (err: LlmError) => {
        log.warn({ err, status: err.status }, "LLM call failed");
        return end("error", [agentError(`${err.message}${err.status ? ` (HTTP ${err.status})` : ""}`)]);
      };
      const reason = limits ? condensationReason(view, estimateTokens(request), limits) : null;
      try {
        // Over the limits: condense first, then build the request again from the stored events.
        if (reason && (await condenseView(view, reason))) continue;
      } catch (err) {
        if (err instanceof LlmError) return await llmFailed(err);
        throw err;
      }
      let response: LlmResponse;
      metrics.agentSteps.inc();
      const llmBegan = performance.now();
      try {
        response = await llm.complete(request, stopSignal(deps));
      } catch (err) {
        deps.shutdown?.throwIfAborted();
        // Interrupted: the call's answer is dropped, nothing of it stored.
        if (deps.interrupt?.aborted) return await end("paused");
        if (!(err instanceof LlmError)) throw err;
        // Too long for the provider: condense and try again, rather than end the run (a loop of
        // these is the context-error stuck pattern).
        if (err instanceof LlmContextLengthError && limits) {
          log.warn({ err }, "LLM refused the request as too long; condensing");
          try {
            if (await condenseView(view, "context_error")) continue;
          } catch (summaryErr) {
            if (summaryErr instanceof LlmError) return await llmFailed(summaryErr);
            throw summaryErr;
          }
          return await end("stuck", [
            agentError(
              "The agent is stuck in a context-error loop: the LLM refused the request as too long, and the " +
                `history cannot be condensed further (${err.message}). (stuck pattern: context_error_loop)`,
            ),
          ]);
        }
        return await llmFailed(err);
      }
      const model = llm.model;
      metrics.llmDuration.observe({ model }, (performance.now() - llmBegan) / 1000);
      metrics.llmTokens.inc({ model, kind: "prompt" }, response.usage.promptTokens);
      metrics.llmTokens.inc({ model, kind: "completion" }, response.usage.completionTokens);
      const usage = usageMetrics(llm, price, response.usage);
      // Our own id, not the provider's: a provider may repeat ids, and the grouping must be exact.
      const responseId = randomUUID();
      // What the model had seen: a user message stored after this is still unanswered.
      const historySeq = history.at(-1)?.seq ?? 0;
      const calls =
        response.toolCalls.length === 0
          ? []
          : toolCallEvents(response, responseId, historySeq, mcp ?? undefined, builtInTools);
      if (await mustConfirm(calls)) {
        // Stored, none run: the run ends here and holds nothing while the user decides; the answer
        // asks for a new run (services: respondToConfirmation).
        log.info({ calls: calls.length }, "tool calls wait for the user's confirmation");
        return await end("waiting_for_confirmation", calls, { metrics: usage });
      }
      const drafts: EventDraft[] =
        response.toolCalls.length === 0
          ? [newEvent.agentMessage(response.text, { llm_response_id: responseId, history_seq: historySeq })]
          : await withInstantResults(calls);
      try {
        spent = (await runs.appendStep(lease, masked(drafts), { maxEvents, metrics: usage })).metrics.accumulated_cost;
      } catch (err) {
        // The conversation is full: the call was made and paid for all the same.
        if (err instanceof EventLimitError) await conversations.addMetrics(conversationId, usage.add, usage.set);
        throw err;
      }
    }
  };

  try {
    context = (await deps.runContext?.(conversation)) ?? noContext;
    const choice = chooseLlm(deps.settings, conversation.llmModel, deps.llmOptions, context.llm);
    if (!choice.ok) return await end("error", [agentError(choice.reason)]);
    await deps.ensureSandboxRunning?.(conversation);
    mcp = await startMcpServers(deps, conversation, context, append, log);
    try {
      return await steps(choice.client);
    } catch (err) {
      // A full conversation ends the run with the reason; its closing events go past the cap.
      if (err instanceof EventLimitError) return await end("error", [agentError(err.message)]);
      throw err;
    } finally {
      await mcp?.close();
    }
  } catch (err) {
    if (err instanceof RunLeaseLostError) {
      log.warn("agent run lost to another worker; stopping without writing");
      return { outcome: "lost" };
    }
    // What the job logs, and stores when it gives up (abandonRun), must not carry a secret either.
    if (err instanceof Error && Object.keys(context.secrets).length) err.message = masked(err.message);
    throw err;
  }
};

/**
 * The user's MCP servers for one run, connected when it starts (stdio ones started in the
 * sandbox). How each fared is one `mcp_servers` state update and, for each server left out, a log
 * line: a server that fails never fails the run. Null when the user has none.
 */
const startMcpServers = async (
  deps: AgentRunDeps,
  conversation: Conversation,
  context: AgentRunContext,
  append: (drafts: EventDraft[]) => Promise<unknown>,
  log: Logger,
): Promise<McpToolSet | null> => {
  const config = context.mcpConfig;
  if (!config || Object.keys(config.mcpServers).length === 0) return null;
  const sandbox = await sandboxOf(deps.db, conversation);
  let set: McpToolSet;
  try {
    set = await connectMcpServers(config, {
      sandboxes: deps.sandboxes,
      sandboxRef: sandbox.ref,
      workspaceDir: conversation.workspaceDir,
      settings: deps.settings,
      secrets: context.secrets,
      logger: log,
      signal: stopSignal(deps),
    });
  } catch (err) {
    // A fault of ours, not of one server: the run goes on without MCP rather than fail.
    const message = maskSecrets((err as Error).message ?? String(err), context.secrets);
    log.error({ error: message }, "MCP servers could not be set up; the run goes on without them");
    const reason = `MCP could not be set up: ${message}`;
    await append([
      newEvent.stateUpdate(
        "mcp_servers",
        Object.entries(config.mcpServers).map(([name, server]) => ({
          name,
          transport: mcpTransportOf(server),
          status: "failed",
          tools: 0,
          reason,
        })),
      ),
    ]);
    return null;
  }
  for (const s of set.status) {
    if (s.status === "failed" || s.status === "skipped") {
      log.warn({ mcp_server: s.name, transport: s.transport, reason: s.reason }, "MCP server left out of the run");
    } else if (s.status === "ready") {
      log.info({ mcp_server: s.name, transport: s.transport, tools: s.tools }, "MCP server connected");
    }
  }
  try {
    await append([newEvent.stateUpdate("mcp_servers", set.status)]);
  } catch (err) {
    await set.close();
    throw err;
  }
  return set;
};

/** For a run whose job BullMQ gave up on (or lost): the conversation ends in `error`, with the reason. */
export const abandonRun = async (db: Kysely<Database>, conversationId: string, runId: string, reason: string) =>
  agentRunsRepository(db).abandon(conversationId, runId, [agentError(`The agent run failed: ${reason}`)]);
