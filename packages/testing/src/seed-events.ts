import { type EventDraftOf, type EventKind, eventKinds, issueSessionApiKey, newEvent, newId } from "@tern/core";
import { conversationsRepository, type Database, startTasksRepository, usersRepository } from "@tern/db";
import { type Kysely, sql } from "kysely";
import type pg from "pg";
import { testSecretBox } from "./secret-box.ts";

export interface ConversationFixture {
  userId: string;
  taskId: string;
  conversationId: string;
  sessionApiKey: string;
}

/** A READY start task and its conversation, owned by `userId` (a new user when absent). */
export const createConversationFixture = async (
  db: Kysely<Database>,
  opts: { userId?: string; title?: string } = {},
): Promise<ConversationFixture> => {
  const userId = opts.userId ?? (await usersRepository(db).create()).id;
  const conversationId = newId();
  // Sealed under this test file's key, as the services a test starts hold it.
  const { key: sessionApiKey, stored } = issueSessionApiKey(testSecretBox(), conversationId);
  // One transaction: a worker's janitor must never see the task in flight without a job.
  const task = await db.transaction().execute(async (trx) => {
    const made = await startTasksRepository(trx).create(userId, { title: opts.title ?? "fixture" });
    await conversationsRepository(trx).createForTask({
      id: conversationId,
      userId,
      startTaskId: made.id,
      title: opts.title ?? "fixture",
      sandboxId: null,
      sessionApiKey: stored,
      selectedRepository: null,
      selectedBranch: null,
      gitProvider: null,
      llmModel: null,
      skills: [],
      workspaceDir: "/workspace/project",
    });
    await startTasksRepository(trx).markReady(made.id, 0, conversationId);
    return made;
  });
  return { userId, taskId: task.id, conversationId, sessionApiKey };
};

const sampleEvents: { [K in EventKind]: (n: number) => EventDraftOf<K> } = {
  MessageEvent: (n) => newEvent.agentMessage(`event ${n}`, { llm_response_id: `response-${n}`, history_seq: n }),
  ActionEvent: (n) =>
    newEvent.action({
      tool_name: "terminal",
      tool_call_id: `call-${n}`,
      thought: [],
      action: { kind: "TerminalAction", command: `echo ${n}` },
      tool_call: { id: `call-${n}`, name: "terminal", arguments: JSON.stringify({ command: `echo ${n}` }) },
      llm_response_id: `response-${n}`,
      history_seq: n,
      security_risk: "LOW",
      summary: `print ${n}`,
    }),
  ObservationEvent: (n) =>
    newEvent.observation({
      tool_name: "terminal",
      tool_call_id: `call-${n}`,
      action_id: `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`,
      observation: {
        kind: "TerminalObservation",
        command: `echo ${n}`,
        exit_code: 0,
        content: [{ type: "text", text: `${n}\n[The command exited with code 0.]` }],
        is_error: false,
      },
    }),
  UserRejectObservation: (n) =>
    newEvent.userReject(
      {
        id: `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`,
        tool_name: "terminal",
        tool_call_id: `call-${n}`,
      },
      `rejected ${n}`,
    ),
  AgentErrorEvent: (n) => newEvent.agentError(`error ${n}`),
  SystemPromptEvent: (n) => newEvent.systemPrompt(`You are test agent ${n}.`, []),
  ConversationStateUpdateEvent: () => newEvent.executionStatus("running"),
  PauseEvent: () => newEvent.pause(),
  CondensationEvent: (n) =>
    newEvent.condensation({
      forgotten_event_ids: [],
      summary: `summary ${n}`,
      summary_offset: 1,
      llm_response_id: `condensation-response-${n}`,
    }),
  InterruptEvent: () => newEvent.interrupt(),
  ConversationErrorEvent: (n) => newEvent.conversationError("MaxIterationsReached", `limit ${n}`),
};

/** A small, valid event of `kind` numbered `n` (its ids and texts say n), as the agent or the user writes it. */
export const sampleEvent = <K extends EventKind>(kind: K, n: number): EventDraftOf<K> => sampleEvents[kind](n);

export interface SeedEventsOptions {
  /** Kinds assigned round-robin by sequence number (default: every known kind). */
  kinds?: readonly EventKind[];
  /** Microseconds between consecutive events (default 1000). */
  stepMicros?: number;
  /** Rows per INSERT statement (default 200,000), so a million rows never sit in one huge transaction. */
  batchSize?: number;
}

/**
 * Appends `count` events to a conversation in bulk with INSERT … SELECT generate_series: fast enough
 * for a million rows. Keeps the conversation's counters (last_seq, last_event_at) in step, so events
 * appended afterwards through eventsRepository continue the order.
 */
export const seedEvents = async (
  db: Kysely<Database>,
  conversationId: string,
  count: number,
  opts: SeedEventsOptions = {},
): Promise<void> => {
  const kinds = opts.kinds ?? eventKinds;
  const samples = kinds.map((k) => sampleEvent(k, 0));
  const step = opts.stepMicros ?? 1000;
  const batch = opts.batchSize ?? 200_000;
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    await db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ first_seq: number; base: string }>`
        update conversations
        set last_seq = last_seq + ${n},
            last_event_at = greatest(clock_timestamp(), coalesce(last_event_at, '-infinity'::timestamptz) + interval '1 microsecond')
                            + (${n}::int - 1) * ${step}::int * interval '1 microsecond'
        where id = ${conversationId}
        returning last_seq - ${n} + 1 as first_seq, last_event_at - (${n}::int - 1) * ${step}::int * interval '1 microsecond' as base
      `.execute(trx);
      const head = rows[0];
      if (!head) throw new Error(`conversation ${conversationId} does not exist`);
      // Kinds round-robin by sequence number, each with a sample of its own payload and source.
      await sql`
        insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
        select ${conversationId}::uuid, ${head.first_seq}::bigint + i, gen_random_uuid(),
               (${sql.val(kinds)}::text[])[1 + k], (${sql.val(samples.map((d) => d.source))}::text[])[1 + k],
               ${head.base}::timestamptz + i * ${step}::int * interval '1 microsecond',
               ${JSON.stringify(samples.map((d) => d.payload))}::jsonb -> k
        from generate_series(0, ${n - 1}) as i,
             lateral (select ((${head.first_seq}::bigint + i) % ${kinds.length})::int as k) as pick
      `.execute(trx);
    });
  }
};

/**
 * Runs a bulk load of events with the events table's indexes and constraints dropped, then recreates
 * each from its own definition, so the schema ends exactly as the migrations made it. A million
 * events load in a third of the time (10 s against 30 here): every row no longer updates four
 * indexes and checks its conversation. `client` is one connection, which the load must not share; its
 * session's maintenance_work_mem sizes the index builds.
 */
export const withoutEventsIndexes = async <T>(client: pg.ClientBase, load: () => Promise<T>): Promise<T> => {
  const constraints = await client.query<{ conname: string; def: string }>(
    "select conname, pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'events'::regclass",
  );
  const indexes = await client.query<{ indexname: string; indexdef: string }>(
    "select indexname, indexdef from pg_indexes where tablename = 'events' and indexname <> all($1)",
    [constraints.rows.map((r) => r.conname)],
  );
  for (const i of indexes.rows) await client.query(`drop index ${i.indexname}`);
  for (const k of constraints.rows) await client.query(`alter table events drop constraint ${k.conname}`);
  const loaded = await load();
  for (const k of constraints.rows) await client.query(`alter table events add constraint ${k.conname} ${k.def}`);
  for (const i of indexes.rows) await client.query(i.indexdef);
  return loaded;
};
