import type {
  AgentHistoryRead,
  ConfirmationPolicy,
  Conversation,
  ConversationMetrics,
  EventDraft,
  ExecutionStatus,
  RunProgress,
  StoredEvent,
} from "@tern/core";
import type { SandboxRef } from "@tern/sandbox";

/**
 * Where a run's events go, and what it reads: declared here, implemented by the worker over
 * Postgres (apps/worker/src/agent/run-store.ts). The agent package never speaks to the database.
 */

/** What a change adds to (and sets in) the conversation's metrics. */
export interface MetricsChange {
  add?: Partial<ConversationMetrics>;
  set?: Partial<ConversationMetrics>;
}

/** The conversation's sandbox: ref null when it is gone (or never made); paused: by the user. */
export interface RunSandbox {
  ref: SandboxRef | null;
  paused: boolean;
}

/** Thrown by a sink whose run was taken by another attempt: the run stops without writing. */
export class RunLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RunLostError";
  }
}

/**
 * Every write of one run, made under its lease: a write after another attempt took the run is
 * refused (RunLostError), and one past the conversation's event cap too (EventLimitError, from
 * @tern/core), with nothing written. The loop hands others (the LLM client's retries and warnings,
 * for instance) the same sink, with the run's secrets masked: `append` takes events of any kind.
 */
export interface EventSink {
  /** The lease's attempt (a fencing token). */
  readonly attempt: number;
  /** Appends events, in one write. */
  append(drafts: EventDraft[]): Promise<StoredEvent[]>;
  /** A step's events and its LLM usage, in one write; answers the conversation's cost since. */
  appendStep(drafts: EventDraft[], metrics?: MetricsChange): Promise<{ accumulatedCost: number | undefined }>;
  /** The run's last events, its final status and (with `metrics`) the usage of its last step, in one write. */
  end(status: ExecutionStatus, drafts: EventDraft[], metrics?: MetricsChange): Promise<void>;
  /** Adds to the conversation's metrics outside any step (a call that was paid for but not stored). */
  addMetrics(change: MetricsChange): Promise<{ accumulatedCost: number | undefined }>;
}

export type BeginRun =
  | { outcome: "started" | "resumed"; sink: EventSink }
  | { outcome: "busy"; activeRunId: string }
  | { outcome: "ended" | "waiting_for_confirmation" | "missing" };

/** What the loop reads of a conversation, and where it takes a run's lease (and with it, its sink). */
export interface AgentStore {
  conversation(conversationId: string): Promise<Conversation | null>;
  /** The run holding the conversation, if any. */
  activeRun(conversationId: string): Promise<string | null>;
  /** A bounded read, whatever the conversation's length: the head, the latest condensation's kept tail and after. */
  readForAgent(conversationId: string): Promise<AgentHistoryRead>;
  runProgress(conversationId: string, sinceSeq: number): Promise<RunProgress>;
  /** The seq of the latest `execution_status: running` event (where the run began); null: none. */
  lastRunStartSeq(conversationId: string): Promise<number | null>;
  latestObservationOf(conversationId: string, toolName: string): Promise<StoredEvent | null>;
  /** The conversation's own confirmation policy; null: its user's settings decide. */
  confirmationPolicy(conversationId: string): Promise<ConfirmationPolicy | null>;
  sandboxOf(conversation: Conversation): Promise<RunSandbox>;
  /** Takes the run's lease (its sink's writes are refused once it is lost); `maxEvents` caps the conversation. */
  begin(conversationId: string, runId: string, opts: { maxEvents?: number | undefined }): Promise<BeginRun>;
}
