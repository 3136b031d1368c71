import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";

/**
 * Synthetic event histories shaped like the agent's (a user message, then action/observation
 * pairs with a message from the agent now and then), written with COPY ... FROM STDIN (text
 * format). Timestamps advance 37 ms per event, so a conversation of 1M events spans ~10 hours.
 */
export const EVENT_STEP_MS = 37;
export const EVENT_BASE_MS = Date.parse("2026-01-01T00:00:00.000Z");

const KIND_CYCLE = [
  "MessageEvent",
  "ActionEvent",
  "ObservationEvent",
  "ActionEvent",
  "ObservationEvent",
  "ActionEvent",
  "ObservationEvent",
  "ActionEvent",
  "ObservationEvent",
  "MessageEvent",
] as const;

/** The kind of event number `seq` (1-based) in every generated conversation. */
export const kindOf = (seq: number): string => KIND_CYCLE[(seq - 1) % KIND_CYCLE.length] as string;

const payloadOf = (kind: string, seq: number): string => {
  switch (kind) {
    case "MessageEvent":
      return `{"llm_message": {"role": "${seq % 20 === 1 ? "user" : "assistant"}", "content": [{"type": "text", "text": "Step ${seq}: looking at the failing test and the module it imports."}]}}`;
    case "ActionEvent":
      return `{"tool_name": "terminal", "tool_call_id": "call_${seq}", "thought": "Run the tests again.", "action": {"command": "pytest -q tests/test_${seq % 97}.py"}}`;
    default:
      return `{"tool_name": "terminal", "tool_call_id": "call_${seq - 1}", "action_id": "00000000-0000-0000-0000-000000000000", "observation": {"content": "${seq % 13} passed, ${seq % 3} failed in 0.${seq % 10}s", "exit_code": ${seq % 3 === 0 ? 0 : 1}}}`;
  }
};

/** "2026-01-01 00:00:00.037000+00": what COPY's text format reads without a cast per row. */
const pgTimestamp = (ms: number): string => {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}000+00`;
};

export const eventTimestampMs = (seq: number): number => EVENT_BASE_MS + (seq - 1) * EVENT_STEP_MS;

/** COPY text lines for events `fromSeq..toSeq` of one conversation, in chunks of ~1000 rows. */
export function* eventLines(conversationId: string, fromSeq: number, toSeq: number): Generator<string> {
  let buf = "";
  for (let seq = fromSeq; seq <= toSeq; seq++) {
    const kind = kindOf(seq);
    const source = kind === "ObservationEvent" ? "environment" : seq % 20 === 1 ? "user" : "agent";
    buf += `${conversationId}\t${seq}\t${randomUUID()}\t${kind}\t${source}\t${pgTimestamp(eventTimestampMs(seq))}\t${payloadOf(kind, seq)}\n`;
    if (seq % 1000 === 0) {
      yield buf;
      buf = "";
    }
  }
  if (buf) yield buf;
}

export const EVENT_COPY_SQL = `copy events (conversation_id, seq, id, kind, source, "timestamp", payload) from stdin`;

/** Streams `lines` into the events table with one COPY on `client`. */
export const copyEvents = async (client: pg.ClientBase, lines: Iterable<string>): Promise<void> => {
  const sink = client.query(copyFrom(EVENT_COPY_SQL));
  await pipeline(Readable.from(lines, { objectMode: false }), sink);
};

/** Inserts bare conversation rows for `ownerId` (no start task: these histories are synthetic). */
export const insertConversations = async (
  client: pg.ClientBase,
  ownerId: string,
  ids: string[],
  lastSeq: (i: number) => number,
): Promise<void> => {
  const rows = ids.map((id, i) => {
    const n = lastSeq(i);
    return {
      id,
      last_seq: n,
      last_event_at: n > 0 ? new Date(eventTimestampMs(n)).toISOString() : null,
      session_api_key: `bench-${id}`,
    };
  });
  await client.query(
    `insert into conversations (id, user_id, title, session_api_key, workspace_dir, last_seq, last_event_at)
     select r.id, $1, 'bench', r.session_api_key, '/workspace', r.last_seq, r.last_event_at
     from jsonb_to_recordset($2::jsonb) as r(id uuid, session_api_key text, last_seq bigint, last_event_at timestamptz)`,
    [ownerId, JSON.stringify(rows)],
  );
};
