import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { type EventDraft, type EventKind, newEvent } from "@tern/core";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";

/**
 * Synthetic event histories shaped like the agent's (a user message, then action/observation
 * pairs with a message from the agent now and then), written with COPY ... FROM STDIN (text
 * format). Timestamps advance 37 ms per event, so a conversation of 1M events spans ~10 hours.
 */
const EVENT_STEP_MS = 37;
const EVENT_BASE_MS = Date.parse("2026-01-01T00:00:00.000Z");
/** Bump when the generated events change, so a dataset kept from an older shape is not reused. */
export const EVENT_DATA_VERSION = 2;

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
const kindOf = (seq: number): EventKind => KIND_CYCLE[(seq - 1) % KIND_CYCLE.length] as EventKind;

const command = (seq: number) => `pytest -q tests/test_${seq % 97}.py`;

/** Event number `seq`, built by the same constructors the agent and the API write with. */
const eventOf = (seq: number): EventDraft => {
  const turn = { llm_response_id: `response_${seq}`, history_seq: seq - 1 };
  switch (kindOf(seq)) {
    case "MessageEvent": {
      const text = `Step ${seq}: looking at the failing test and the module it imports.`;
      return seq % 20 === 1 ? newEvent.userMessage([{ type: "text", text }]) : newEvent.agentMessage(text, turn);
    }
    case "ActionEvent":
      return newEvent.action({
        tool_name: "terminal",
        tool_call_id: `call_${seq}`,
        thought: [{ type: "text", text: "Run the tests again." }],
        action: { kind: "TerminalAction", command: command(seq) },
        tool_call: { id: `call_${seq}`, name: "terminal", arguments: JSON.stringify({ command: command(seq) }) },
        ...turn,
      });
    default:
      return newEvent.observation({
        tool_name: "terminal",
        tool_call_id: `call_${seq - 1}`,
        action_id: "00000000-0000-0000-0000-000000000000",
        observation: {
          kind: "TerminalObservation",
          command: command(seq - 1),
          exit_code: seq % 3 === 0 ? 0 : 1,
          content: [{ type: "text", text: `${seq % 13} passed, ${seq % 3} failed in 0.${seq % 10}s` }],
          is_error: false,
        },
      });
  }
};

/** JSON as a COPY text-format field: its backslashes doubled (JSON has no raw tab or newline). */
const copyJson = (value: unknown): string => JSON.stringify(value).replaceAll("\\", "\\\\");

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
    const e = eventOf(seq);
    buf += `${conversationId}\t${seq}\t${randomUUID()}\t${e.kind}\t${e.source}\t${pgTimestamp(eventTimestampMs(seq))}\t${copyJson(e.payload)}\n`;
    if (seq % 1000 === 0) {
      yield buf;
      buf = "";
    }
  }
  if (buf) yield buf;
}

const EVENT_COPY_SQL = `copy events (conversation_id, seq, id, kind, source, "timestamp", payload) from stdin`;

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
    };
  });
  await client.query(
    `insert into conversations (id, user_id, title, workspace_dir, last_seq, last_event_at)
     select r.id, $1, 'bench', '/workspace', r.last_seq, r.last_event_at
     from jsonb_to_recordset($2::jsonb) as r(id uuid, last_seq bigint, last_event_at timestamptz)`,
    [ownerId, JSON.stringify(rows)],
  );
};
