import { randomUUID } from "node:crypto";
import { type EventDraft, newEvent } from "@tern/core";
import { agentRunsRepository, createDb, eventsRepository, type RunLease, stepWriterOf } from "@tern/db";
import { createTestDatabase } from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { copyEvents, eventLines, insertConversations } from "../event-data.ts";
import { type BenchRow, row } from "../report.ts";
import { summarize, tailKeys, tailText } from "../stats.ts";

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

    const newConversations = async (n = writers) => {
      const ids = Array.from({ length: n }, () => randomUUID());
      const c = await db.pool.connect();
      try {
        await insertConversations(c, owner, ids, () => 0);
      } finally {
        c.release();
      }
      return ids;
    };
    /** Events/s of `n` conversations appending at once, and each write's latency (ms). */
    const measure = async (
      append: (conversationId: string, drafts: EventDraft[]) => Promise<unknown>,
      batch: number,
      perWriter: number,
      n = writers,
      /** Before the clock starts: what each conversation needs first (a run's lease). */
      prepare: (conversationId: string) => Promise<void> = async () => undefined,
    ) => {
      const conversations = await newConversations(n);
      for (const id of conversations) await prepare(id);
      const latencies: number[] = [];
      const t = performance.now();
      await Promise.all(
        conversations.map(async (id) => {
          for (let i = 0; i < perWriter; i += batch) {
            const drafts = Array.from({ length: batch }, (_, j) => draft(i + j, batch));
            const w = performance.now();
            await append(id, drafts);
            latencies.push(performance.now() - w);
          }
        }),
      );
      return { rate: (n * perWriter) / ((performance.now() - t) / 1000), write: summarize(latencies) };
    };

    // The agent's writer as the loop writes a step (packages/agent/src/loop.ts): an LLM response
    // of `calls` tool calls is one appendStep (its ActionEvents and its usage added to the
    // conversation's metrics), and their results another (a command, then quick views after it:
    // held and written together). Each appendStep checks the run lease under the conversation's
    // row lock; the steps of all runs that arrive while a commit is in flight share the next
    // commit (group commit, packages/db step-writer.ts), as in a worker process.
    // A pool sized as the worker's (createDb's default), not the test database's small one.
    const writerDb = createDb(db.url);
    const runs = agentRunsRepository(writerDb.db);
    const calls = 3;
    const usage = { add: { llm_calls: 1, prompt_tokens: 12_000, completion_tokens: 300, accumulated_cost: 0.04 } };
    const { synchronous_commit } = (await db.pool.query("show synchronous_commit")).rows[0] as {
      synchronous_commit: string;
    };
    // What bounds a run's write whatever the statement: one commit's round trip. Each run waits
    // for its write's commit before the next, so `runs` writes of `calls` events per commit
    // latency is the most any writer can do here (Little's law); measured right before each row.
    await db.pool.query("create table commit_probe (id int primary key, n bigint not null)");
    await db.pool.query("insert into commit_probe values (1, 0)");
    const commitLatency = async () => {
      const samples: number[] = [];
      for (let i = 0; i < 50; i++) {
        const t = performance.now();
        await db.pool.query("update commit_probe set n = n + 1 where id = 1");
        samples.push(performance.now() - t);
      }
      return summarize(samples);
    };
    // The gate compares the 8-run writer with COPY alone.
    const agentRows = ctx.gate
      ? ([["append.agent", writers]] as const)
      : ([
          ["append.agent", writers],
          ["append.agent64", 64],
        ] as const);
    for (const [id, runsAtOnce] of agentRows) {
      const leases = new Map<string, RunLease>();
      // Whole steps (2 writes of `calls` events), about half as many events in all as a batch row.
      const agentPerWriter = 2 * calls * Math.max(1, Math.round((perWriter * writers) / (4 * calls * runsAtOnce)));
      const commit = await commitLatency();
      const commitBound = (runsAtOnce * calls) / (commit.p50 / 1000);
      const stats = { ...stepWriterOf(writerDb.db).stats };
      const agent = await measure(
        async (conversationId, drafts) => {
          const lease = leases.get(conversationId) as RunLease;
          // The response's write (actions) carries the LLM usage; the results' write does not.
          await runs.appendStep(lease, drafts, drafts[0]?.kind === "ActionEvent" ? { metrics: usage } : {});
        },
        calls,
        agentPerWriter,
        runsAtOnce,
        // Each run takes its lease before the clock starts (64 begins are not a step write's cost).
        async (conversationId) => {
          const begun = await runs.begin(conversationId, randomUUID());
          if (begun.outcome !== "started") throw new Error(`run did not start: ${begun.outcome}`);
          leases.set(conversationId, begun.lease);
        },
      );
      const after = stepWriterOf(writerDb.db).stats;
      const groups = after.groups - stats.groups;
      const stepWrites = after.writes - stats.writes;
      ctx.progress(
        `agent writer, ${runsAtOnce} runs: ${agent.rate.toFixed(0)} events/s, one write p50 ${agent.write.p50.toFixed(2)} ms, ${tailText(agent.write)}, ${(stepWrites / groups).toFixed(1)} writes per commit (COPY ${copyRate.toFixed(0)}; a one-row commit p50 ${commit.p50.toFixed(2)} ms, so at most ${commitBound.toFixed(0)} events/s)`,
      );
      rows.push(
        row({
          id,
          label: `event append, agent writer (steps of ${calls} calls: 2 writes of ${calls} events, ${runsAtOnce} runs at once, group commit, synchronous_commit ${synchronous_commit})`,
          unit: "events/s",
          value: agent.rate,
          floor: copyRate,
          floorLabel: "COPY",
          better: "higher-is-better",
          absolute: 10_000,
          detail: {
            events: runsAtOnce * agentPerWriter,
            runs: runsAtOnce,
            eventsPerWrite: calls,
            eventsPerStep: 2 * calls,
            writesPerStep: 2,
            synchronousCommit: synchronous_commit,
            writeLatencyMs: agent.write,
            commits: groups,
            writesPerCommit: stepWrites / groups,
            // One-row update commits, one after another on one connection, right before the row;
            // commitBoundEventsPerS: runs × events per write / that p50, the rate no writer whose
            // runs each wait for their commit can pass.
            emptyCommitMs: commit,
            commitBoundEventsPerS: commitBound,
          },
        }),
      );
      for (const k of tailKeys(agent.write, false)) {
        rows.push(
          row({
            id: `${id}.write.${k}`,
            label: `  one step write ${k} (${runsAtOnce} runs at once)`,
            unit: "ms",
            value: agent.write[k],
            detail: { ...agent.write },
          }),
        );
      }
    }
    if (ctx.gate) {
      await writerDb.close();
      return rows;
    }

    const events = eventsRepository(writerDb.db);
    for (const batch of [1, 10]) {
      const { rate } = await measure(
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
