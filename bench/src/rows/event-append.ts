import { randomUUID } from "node:crypto";
import { type EventDraft, newEvent } from "@tern/core";
import { agentRunsRepository, createDb, eventsRepository, type RunLease } from "@tern/db";
import { createTestDatabase } from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { copyEvents, eventLines, insertConversations } from "../event-data.ts";
import { type BenchRow, row } from "../report.ts";

/**
 * Event `i` of an agent's run, in writes of `calls` events: a response's actions, then their
 * observations (i / calls even: actions).
 */
const draft = (i: number, calls = 1): EventDraft =>
  Math.floor(i / calls) % 2 === 0
    ? newEvent.action({
        tool_name: "terminal",
        tool_call_id: `call_${i}`,
        thought: [{ type: "text", text: "Run the tests." }],
        action: { kind: "TerminalAction", command: "pytest -q" },
        tool_call: { id: `call_${i}`, name: "terminal", arguments: '{"command":"pytest -q"}' },
        llm_response_id: `response_${i}`,
        history_seq: i,
      })
    : newEvent.observation({
        tool_name: "terminal",
        tool_call_id: `call_${i - calls}`,
        action_id: "00000000-0000-0000-0000-000000000000",
        observation: {
          kind: "TerminalObservation",
          command: "pytest -q",
          exit_code: 0,
          content: [{ type: "text", text: "3 passed" }],
          is_error: false,
        },
      });

/**
 * Event append: `writers` conversations append at once, each one batch after another (as agent
 * runs do, one per conversation), through eventsRepository.append; against COPY of the same
 * number of events into as many fresh conversations, in the same database and run.
 */
export const eventAppendRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const db = await createTestDatabase();
  try {
    const writers = 8;
    const perWriter = ctx.quick ? 1_000 : 10_000;
    const total = writers * perWriter;
    const owner = randomUUID();
    await db.pool.query("insert into users (id) values ($1)", [owner]);
    const rows: BenchRow[] = [];

    const copyConversations = Array.from({ length: writers }, () => randomUUID());
    const client = await db.pool.connect();
    let copyRate: number;
    try {
      await insertConversations(client, owner, copyConversations, () => 0);
      const t = performance.now();
      await copyEvents(
        client,
        (function* () {
          for (const id of copyConversations) yield* eventLines(id, 1, perWriter);
        })(),
      );
      copyRate = total / ((performance.now() - t) / 1000);
    } finally {
      client.release();
    }

    const newConversations = async () => {
      const ids = Array.from({ length: writers }, () => randomUUID());
      const c = await db.pool.connect();
      try {
        await insertConversations(c, owner, ids, () => 0);
      } finally {
        c.release();
      }
      return ids;
    };
    const measure = async (
      append: (conversationId: string, drafts: EventDraft[]) => Promise<unknown>,
      batch: number,
      perWriter: number,
    ) => {
      const conversations = await newConversations();
      const t = performance.now();
      await Promise.all(
        conversations.map(async (id) => {
          for (let i = 0; i < perWriter; i += batch) {
            const drafts = Array.from({ length: batch }, (_, j) => draft(i + j, batch));
            await append(id, drafts);
          }
        }),
      );
      return (writers * perWriter) / ((performance.now() - t) / 1000);
    };

    // The agent's writer as the loop writes a step (packages/agent/src/loop.ts): an LLM response
    // of `calls` tool calls is one appendStep (its ActionEvents and its usage added to the
    // conversation's metrics), and their results another (a command, then quick views after it:
    // held and written together). Each appendStep checks the run lease in its own statement,
    // under the conversation's row lock: one round trip and one commit per write.
    // A pool sized as the worker's (createDb's default), not the test database's small one.
    const writerDb = createDb(db.url);
    const runs = agentRunsRepository(writerDb.db);
    const leases = new Map<string, RunLease>();
    const calls = 3;
    const usage = { add: { llm_calls: 1, prompt_tokens: 12_000, completion_tokens: 300, accumulated_cost: 0.04 } };
    // Whole steps (2 writes of `calls` events), about half as many events as a batch row.
    const agentPerWriter = 2 * calls * Math.round(perWriter / (4 * calls));
    const agentRate = await measure(
      async (conversationId, drafts) => {
        let lease = leases.get(conversationId);
        if (!lease) {
          const begun = await runs.begin(conversationId, randomUUID());
          if (begun.outcome !== "started") throw new Error(`run did not start: ${begun.outcome}`);
          lease = begun.lease;
          leases.set(conversationId, lease);
        }
        // The response's write (actions) carries the LLM usage; the results' write does not.
        await runs.appendStep(lease, drafts, drafts[0]?.kind === "ActionEvent" ? { metrics: usage } : {});
      },
      calls,
      agentPerWriter,
    );
    ctx.progress(`agent writer: ${agentRate.toFixed(0)} events/s (COPY ${copyRate.toFixed(0)})`);
    rows.push(
      row({
        id: "append.agent",
        label: `event append, agent writer (steps of ${calls} calls: 2 writes of ${calls} events, ${writers} conversations)`,
        unit: "events/s",
        value: agentRate,
        floor: copyRate,
        floorLabel: "COPY",
        better: "higher-is-better",
        absolute: 10_000,
        detail: {
          events: writers * agentPerWriter,
          writers,
          eventsPerWrite: calls,
          eventsPerStep: 2 * calls,
          writesPerStep: 2,
        },
      }),
    );

    const events = eventsRepository(writerDb.db);
    for (const batch of [1, 10]) {
      const rate = await measure(
        (id, drafts) => events.append(id, drafts),
        batch,
        batch === 1 ? perWriter / 4 : perWriter,
      );
      ctx.progress(`eventsRepository.append batch ${batch}: ${rate.toFixed(0)} events/s`);
      rows.push(
        row({
          id: `append.batch${batch}`,
          label: `event append, eventsRepository batches of ${batch}, ${writers} conversations`,
          unit: "events/s",
          value: rate,
          floor: copyRate,
          floorLabel: "COPY",
          better: "higher-is-better",
          detail: { events: writers * (batch === 1 ? perWriter / 4 : perWriter), writers, batch },
        }),
      );
    }
    await writerDb.close();
    return rows;
  } finally {
    await db.drop();
  }
};
