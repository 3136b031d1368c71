import { type EventPageRequest, eventsSearchRepository } from "@tern/db";
import {
  createConversationFixture,
  createTestDatabase,
  scaled,
  seedEvents,
  type TestDatabase,
  withoutEventsIndexes,
} from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The events search at a million events in one conversation: every page is one index range scan,
 * whatever its depth, and nothing reads the table sequentially or sorts it.
 */
let database: TestDatabase;
let conversationId: string;
let timestamps: { first: string; mid: string; late: string };
const N = 1_000_000;

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

const explain = async (req: EventPageRequest): Promise<PlanNode[]> => {
  const compiled = eventsSearchRepository(database.db).compilePage(req);
  const { rows } = await database.pool.query(`explain (format json) ${compiled.sql}`, [...compiled.parameters]);
  const plan = (rows[0] as { "QUERY PLAN": { Plan: PlanNode }[] })["QUERY PLAN"][0]?.Plan;
  if (!plan) throw new Error("no plan");
  return nodes(plan);
};

const expectIndexRange = (plan: PlanNode[], index: string, condMentions: string[]) => {
  const types = plan.map((n) => n["Node Type"]);
  expect(types).not.toContain("Seq Scan");
  expect(types).not.toContain("Sort");
  expect(types).not.toContain("Bitmap Heap Scan");
  const scan = plan.find((n) => n["Node Type"] === "Index Scan" || n["Node Type"] === "Index Only Scan");
  expect(scan?.["Index Name"], JSON.stringify(plan)).toBe(index);
  for (const column of condMentions) expect(scan?.["Index Cond"]).toContain(column);
};

beforeAll(async () => {
  database = await createTestDatabase();
  // Neighbours, so the conversation is one of several, as in production.
  for (let i = 0; i < 3; i++) {
    await seedEvents(database.db, (await createConversationFixture(database.db)).conversationId, 1_000);
  }
  conversationId = (await createConversationFixture(database.db)).conversationId;
  const client = await database.pool.connect();
  try {
    await client.query("set maintenance_work_mem = '256MB'");
    await withoutEventsIndexes(client, () => seedEvents(database.db, conversationId, N));
  } finally {
    client.release(true);
  }
  await sql`analyze events`.execute(database.db);
  const at = async (seq: number) =>
    (
      await database.db
        .selectFrom("events")
        .select("timestamp")
        .where("conversation_id", "=", conversationId)
        .where("seq", "=", seq)
        .executeTakeFirstOrThrow()
    ).timestamp;
  timestamps = { first: await at(1), mid: await at(N / 2), late: await at(N - 1_000) };
}, scaled(180_000));

afterAll(async () => database?.drop());

describe("events search plans at 1M events", () => {
  it("holds a million events", async () => {
    const { n } = await database.db
      .selectFrom("events")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("conversation_id", "=", conversationId)
      .executeTakeFirstOrThrow();
    expect(Number(n)).toBe(N);
  });

  it("first page: a range of events_conv_ts_idx", async () => {
    expectIndexRange(await explain({ filter: { conversationId }, order: "asc", limit: 100 }), "events_conv_ts_idx", [
      "conversation_id",
    ]);
    expectIndexRange(await explain({ filter: { conversationId }, order: "desc", limit: 100 }), "events_conv_ts_idx", [
      "conversation_id",
    ]);
  });

  it("deep page: the cursor is part of the index condition, in both orders", async () => {
    const after = { timestamp: timestamps.late, seq: N - 1_000 };
    for (const order of ["asc", "desc"] as const) {
      expectIndexRange(await explain({ filter: { conversationId }, order, after, limit: 100 }), "events_conv_ts_idx", [
        "conversation_id",
        "timestamp",
        "seq",
      ]);
    }
  });

  it("kind filter: a range of events_conv_kind_ts_idx, also deep", async () => {
    const filter = { conversationId, kind: "ActionEvent" as const };
    expectIndexRange(await explain({ filter, order: "asc", limit: 100 }), "events_conv_kind_ts_idx", ["kind"]);
    const after = { timestamp: timestamps.mid, seq: N / 2 };
    expectIndexRange(await explain({ filter, order: "desc", after, limit: 100 }), "events_conv_kind_ts_idx", [
      "kind",
      "seq",
    ]);
  });

  it("time window: the bounds are index conditions", async () => {
    const filter = { conversationId, timestampGte: timestamps.mid, timestampLt: timestamps.late };
    expectIndexRange(await explain({ filter, order: "asc", limit: 100 }), "events_conv_ts_idx", ["timestamp"]);
    const after = { timestamp: timestamps.mid, seq: N / 2 };
    expectIndexRange(
      await explain({ filter: { ...filter, kind: "MessageEvent" }, order: "asc", after, limit: 100 }),
      "events_conv_kind_ts_idx",
      ["kind", "timestamp", "seq"],
    );
  });
});
