import {
  type Conversation,
  EventLimitError,
  type ExecutionStatus,
  type Logger,
  type McpConfig,
  type SecurityAnalyzer,
} from "@tern/core";
import type { SandboxDriver } from "@tern/sandbox";
import type { CondenserSettings } from "./condenser/condense.ts";
import { conversationLoop } from "./conversation-loop.ts";
import type { PriceTable } from "./llm/models.ts";
import {
  chooseLlm,
  type LlmClientOptions,
  type LlmSettings,
  type UserLlmSettings,
  unknownModelWarning,
} from "./llm/select.ts";
import type { McpSettings } from "./mcp/session.ts";
import { startMcpServers } from "./run-mcp.ts";
import { analyzeRun } from "./run-state.ts";
import { agentError, endRun, noContext, type RunScope, runScope, sandboxPaused } from "./scope.ts";
import { type AgentStore, type EventSink, RunLostError } from "./sink.ts";
import type { GitToolRunner } from "./tools/git.ts";

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
   * API); absent or null: all of them. A call of another is an error the model reads.
   */
  tools?: readonly string[] | null;
}

export interface AgentRunDeps {
  /** Where the run reads the conversation and takes its lease, and so its event sink (sink.ts). */
  store: AgentStore;
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
  /**
   * The user's pause: what waits on their MCP servers' start-up ends now (the loop then pauses
   * before its first step); a step in progress finishes, as a pause lets it.
   */
  pause?: AbortSignal;
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

/**
 * Takes the run's lease, and with it its event sink; or says why the run does not go on now. A new
 * run with nothing to answer writes nothing (e.g. a second /run after the agent finished).
 */
const takeLease = async (
  deps: AgentRunDeps,
  conversation: Conversation,
  runId: string,
  log: Logger,
): Promise<EventSink | RunOutcome> => {
  const { store } = deps;
  // Cheap check first: a run waiting for another one is asked again every second or so.
  const holder = await store.activeRun(conversation.id);
  if (holder && holder !== runId) return { outcome: "busy", activeRunId: holder };
  if (holder !== runId && !analyzeRun((await store.readForAgent(conversation.id)).recent).needsAgent) {
    return { outcome: "skipped", reason: "nothing to answer" };
  }
  // While the sandbox is paused a run waits, and does so before it takes (or takes again) the
  // lock: looking again every few seconds then costs no attempt and writes nothing.
  if ((await store.sandboxOf(conversation)).paused) return sandboxPaused;
  const maxEvents = deps.settings.MAX_EVENTS_PER_CONVERSATION || undefined;
  const begun = await store.begin(conversation.id, runId, { maxEvents });
  switch (begun.outcome) {
    case "busy":
      return { outcome: "busy", activeRunId: begun.activeRunId };
    case "ended":
      return { outcome: "skipped", reason: "run already ended" };
    case "waiting_for_confirmation":
      return { outcome: "skipped", reason: "tool calls wait for the user's confirmation" };
    case "missing":
      return { outcome: "skipped", reason: "no such conversation" };
  }
  log.info({ outcome: begun.outcome, attempt: begun.sink.attempt }, "agent run taken");
  return begun.sink;
};

/** The run, once it holds the conversation: the user's part, the LLM, the sandbox, MCP, then the loop. */
const holdRun = async (run: RunScope): Promise<RunOutcome> => {
  const { deps, conversation } = run;
  run.context = (await deps.runContext?.(conversation)) ?? noContext;
  const choice = chooseLlm(deps.settings, conversation.llmModel, deps.llmOptions, run.context.llm);
  if (!choice.ok) return endRun(run, "error", [agentError(choice.reason)]);
  await deps.ensureSandboxRunning?.(conversation);
  run.mcp = await startMcpServers(run);
  try {
    // A model the table does not know runs on conservative defaults: said in the log at each run.
    if (!choice.facts) run.log.warn(unknownModelWarning(choice.client.model, choice.maxOutputTokens));
    return await conversationLoop(run, choice.client, choice);
  } catch (err) {
    // A full conversation ends the run with the reason; its closing events go past the cap.
    if (err instanceof EventLimitError) return endRun(run, "error", [agentError(err.message)]);
    throw err;
  } finally {
    await run.mcp?.close();
  }
};

/**
 * One run of the agent on a conversation (conversation-loop.ts). A call whose ActionEvent is
 * stored but not its ObservationEvent is run through the sandbox's run-once record
 * (tools/run-once.ts), which returns the first execution's result: a run resumed by another
 * worker continues, not restarts.
 */
export const runAgent = async (deps: AgentRunDeps, conversationId: string, runId: string): Promise<RunOutcome> => {
  const log = deps.logger.child({ conversation_id: conversationId, run_id: runId });
  const conversation = await deps.store.conversation(conversationId);
  if (!conversation) return { outcome: "skipped", reason: "no such conversation" };
  const leased = await takeLease(deps, conversation, runId, log);
  if ("outcome" in leased) return leased;
  const run = runScope({ deps, store: deps.store, conversation, log }, leased);
  try {
    return await holdRun(run);
  } catch (err) {
    if (err instanceof RunLostError) {
      log.warn("agent run lost to another worker; stopping without writing");
      return { outcome: "lost" };
    }
    // What the job logs, and stores when it gives up (abandonRun), must not carry a secret either.
    if (err instanceof Error && Object.keys(run.context.secrets).length) err.message = run.masked(err.message);
    throw err;
  }
};
