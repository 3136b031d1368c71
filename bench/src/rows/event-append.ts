import { randomUUID } from "node:crypto";
import type { EventKind } from "@tern/core";
import { type EventDraft, eventsRepository } from "@tern/db";
import { createTestDatabase } from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { copyEvents, eventLines, insertConversations } from "../event-data.ts";
import { type BenchRow, row } from "../report.ts";

const draft = (kind: EventKind, i: number): EventDraft =>
  kind === "ActionEvent"
    ? {
        kind,
        source: "agent",
        payload: {
          tool_name: "terminal",
          tool_call_id: `call_${i}`,
          thought: "Run the tests.",
          action: { command: "pytest -q" },
        },
      }
    : {
        kind,
        source: "environment",
        payload: {
          tool_name: "terminal",
          tool_call_id: `call_${i}`,
          observation: { content: "3 passed", exit_code: 0 },
        },
      };

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

    const events = eventsRepository(db.db);
    for (const batch of [1, 2, 10]) {
      const conversations = Array.from({ length: writers }, () => randomUUID());
      const c = await db.pool.connect();
      try {
        await insertConversations(c, owner, conversations, () => 0);
      } finally {
        c.release();
      }
      const t = performance.now();
      await Promise.all(
        conversations.map(async (id) => {
          for (let i = 0; i < perWriter; i += batch) {
            const drafts = Array.from({ length: batch }, (_, j) =>
              draft((i + j) % 2 === 0 ? "ActionEvent" : "ObservationEvent", i + j),
            );
            await events.append(id, drafts);
          }
        }),
      );
      const rate = total / ((performance.now() - t) / 1000);
      ctx.progress(`append batch ${batch}: ${rate.toFixed(0)} events/s (COPY ${copyRate.toFixed(0)})`);
      rows.push(
        row({
          id: `append.batch${batch}`,
          label: `event append, batches of ${batch}, ${writers} conversations`,
          unit: "events/s",
          value: rate,
          floor: copyRate,
          floorLabel: "COPY",
          better: "higher-is-better",
          ...(batch === 2 ? { absolute: 20_000 } : {}),
          detail: { events: total, writers, batch },
        }),
      );
    }
    return rows;
  } finally {
    await db.drop();
  }
};
