import {
  type Conversation,
  type EventDraft,
  type ExecutionStatus,
  type Logger,
  maskSecrets,
  newEvent,
} from "@tern/core";
import type { AgentRunContext, AgentRunDeps, RunOutcome } from "./loop.ts";
import type { McpToolSet } from "./mcp/session.ts";
import type { AgentStore, EventSink, MetricsChange } from "./sink.ts";

/** What one run holds while it works: shared by the loop, its steps and the dispatch of their calls. */
export interface RunScope {
  readonly deps: AgentRunDeps;
  readonly store: AgentStore;
  readonly conversation: Conversation;
  readonly log: Logger;
  /** The run's sink with its secrets masked: every event of the run leaves through it. */
  readonly sink: EventSink;
  /** The user's part of the run (secrets, LLM, limits), filled once the run holds the conversation. */
  context: AgentRunContext;
  /** The user's MCP servers for this run, connected once it holds the conversation. */
  mcp: McpToolSet | null;
  /** `value` with the run's secrets (and its MCP servers' values) masked. */
  masked<T>(value: T): T;
}

export const agentError = newEvent.agentError;

export const noContext: AgentRunContext = { secrets: {}, llm: null, maxIterations: null, maxBudgetPerTask: null };

export const sandboxPaused: RunOutcome = { outcome: "waiting", reason: "the conversation's sandbox is paused" };

/** Every string inside `value` with the secrets' values masked (events are JSON: walk, not stringify). */
const maskDeep = <T>(value: T, secrets: Record<string, string>): T => {
  if (typeof value === "string") return maskSecrets(value, secrets) as T;
  if (Array.isArray(value)) return value.map((v) => maskDeep(v, secrets)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskDeep(v, secrets)])) as T;
  }
  return value;
};

/** The scope of a run that holds its lease: its sink masks whatever it is given. */
export const runScope = (
  fields: Pick<RunScope, "deps" | "store" | "conversation" | "log">,
  leased: EventSink,
): RunScope => {
  const scope: RunScope = {
    ...fields,
    context: noContext,
    mcp: null,
    masked: <T>(value: T): T => {
      const values = scope.mcp ? { ...scope.mcp.maskValues, ...scope.context.secrets } : scope.context.secrets;
      return Object.keys(values).length ? maskDeep(value, values) : value;
    },
    sink: {
      attempt: leased.attempt,
      append: (drafts) => leased.append(scope.masked(drafts)),
      appendStep: (drafts, metrics) => leased.appendStep(scope.masked(drafts), metrics),
      end: (status, drafts, metrics) => leased.end(status, scope.masked(drafts), metrics),
      addMetrics: (change) => leased.addMetrics(change),
    },
  };
  return scope;
};

/** Ends the run with its last events (and the usage of the step that ended it). */
export const endRun = async (
  run: RunScope,
  status: ExecutionStatus,
  drafts: EventDraft[] = [],
  metrics?: MetricsChange,
): Promise<RunOutcome> => {
  await run.sink.end(status, drafts, metrics);
  run.log.info({ status }, "agent run ended");
  return { outcome: "ended", status };
};
