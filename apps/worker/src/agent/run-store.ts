import { type AgentStore, type EventSink, RunLostError } from "@tern/agent";
import { type Conversation, isSandboxGone, newEvent } from "@tern/core";
import {
  agentRunsRepository,
  confirmationsRepository,
  conversationsRepository,
  type Database,
  eventsRepository,
  type RunLease,
  RunLeaseLostError,
  sandboxesRepository,
} from "@tern/db";
import type { Kysely } from "kysely";

/** A lease that was lost: the agent's own error, so it never needs to know the database's. */
const leased = async <T>(write: Promise<T>): Promise<T> => {
  try {
    return await write;
  } catch (err) {
    if (err instanceof RunLeaseLostError) throw new RunLostError(err.message);
    throw err;
  }
};

/** A run's event sink: every write fenced by its lease (agentRunsRepository), up to `maxEvents`. */
const leaseSink = (db: Kysely<Database>, lease: RunLease, maxEvents: number | undefined): EventSink => {
  const runs = agentRunsRepository(db);
  return {
    attempt: lease.attempt,
    append: (drafts) => leased(runs.append(lease, drafts, { maxEvents })),
    appendStep: async (drafts, metrics) => {
      const done = await leased(runs.appendStep(lease, drafts, { maxEvents, ...(metrics ? { metrics } : {}) }));
      return { accumulatedCost: done.metrics.accumulated_cost };
    },
    end: async (status, drafts, metrics) => {
      await leased(runs.end(lease, status, drafts, metrics ? { metrics } : {}));
    },
    addMetrics: async ({ add = {}, set = {} }) => {
      const metrics = await conversationsRepository(db).addMetrics(lease.conversationId, add, set);
      return { accumulatedCost: metrics?.accumulated_cost };
    },
  };
};

/** The agent loop's reads and lease over Postgres: what the worker hands every run (packages/agent sink.ts). */
export const agentRunStore = (db: Kysely<Database>): AgentStore => {
  const events = eventsRepository(db);
  return {
    conversation: (id) => conversationsRepository(db).get(id),
    activeRun: (id) => agentRunsRepository(db).activeRun(id),
    readForAgent: (id) => events.readForAgent(id),
    runProgress: (id, sinceSeq) => events.runProgress(id, sinceSeq),
    lastRunStartSeq: (id) => events.lastRunStartSeq(id),
    latestObservationOf: (id, toolName) => events.latestObservationOf(id, toolName),
    confirmationPolicy: (id) => confirmationsRepository(db).policy(id),
    sandboxOf: async (conversation: Conversation) => {
      if (!conversation.sandboxId) return { ref: null, paused: false };
      const sandbox = await sandboxesRepository(db).get(conversation.sandboxId);
      if (!sandbox || isSandboxGone(sandbox.status)) return { ref: null, paused: false };
      // Paused by the janitor for idleness, the run resumes it (ensureSandboxRunning); paused by the
      // user (POST /sandboxes/{id}/pause), the run waits until the user resumes it.
      return { ref: sandbox.ref ?? sandbox.name, paused: sandbox.status === "PAUSED" && !sandbox.idlePausedAt };
    },
    begin: async (conversationId, runId, { maxEvents }) => {
      const begun = await agentRunsRepository(db).begin(conversationId, runId);
      switch (begun.outcome) {
        case "started":
        case "resumed":
          return { outcome: begun.outcome, sink: leaseSink(db, begun.lease, maxEvents) };
        case "busy":
          return begun;
        default:
          return { outcome: begun.outcome };
      }
    },
  };
};

/** For a run whose job BullMQ gave up on (or lost): the conversation ends in `error`, with the reason. */
export const abandonRun = async (db: Kysely<Database>, conversationId: string, runId: string, reason: string) =>
  agentRunsRepository(db).abandon(conversationId, runId, [newEvent.agentError(`The agent run failed: ${reason}`)]);
