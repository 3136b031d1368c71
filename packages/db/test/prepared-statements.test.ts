import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb, type DbHandle, statementName } from "../src/connection.ts";

let database: TestDatabase;
let handle: DbHandle;

beforeAll(async () => {
  database = await createTestDatabase();
  handle = createDb(database.url, { max: 1 });
});

afterAll(async () => {
  await handle?.close();
  await database?.drop();
});

const preparedOn = (db: DbHandle["db"]) =>
  db.connection().execute(async (c) => {
    const byId = (id: string) => c.selectFrom("conversations").select(["id", "user_id"]).where("id", "=", id);
    const a = await createConversationFixture(database.db);
    const b = await createConversationFixture(database.db);
    // The same statement twice with other values: both answers right.
    const first = await byId(a.conversationId).executeTakeFirst();
    const second = await byId(b.conversationId).executeTakeFirst();
    const prepared = await sql<{ name: string; statement: string }>`
      select name, statement from pg_prepared_statements
    `.execute(c);
    return { first, second, a, b, prepared: prepared.rows, text: byId(a.conversationId).compile().sql };
  });

describe("createDb: prepared statements", () => {
  it("sends a query with parameters as a statement named by its text, prepared once per connection", async () => {
    const { first, second, a, b, prepared, text } = await preparedOn(handle.db);
    expect(first?.id).toBe(a.conversationId);
    expect(second?.id).toBe(b.conversationId);
    const mine = prepared.filter((p) => p.statement === text);
    expect(mine).toEqual([{ name: statementName(text), statement: text }]);
  });

  it("prepares nothing when asked not to", async () => {
    const plain = createDb(database.url, { max: 1, preparedStatements: false });
    try {
      const { first, a, prepared } = await preparedOn(plain.db);
      expect(first?.id).toBe(a.conversationId);
      expect(prepared).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  it("keeps transactions, rollbacks and errors working on a prepared connection", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    await expect(
      handle.db.transaction().execute(async (trx) => {
        await trx.updateTable("conversations").set({ title: "inside" }).where("id", "=", conversationId).execute();
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    const title = () =>
      handle.db.selectFrom("conversations").select("title").where("id", "=", conversationId).executeTakeFirst();
    expect((await title())?.title).not.toBe("inside");
    // A statement that fails (a bad uuid) leaves the connection usable, and its name reusable.
    for (let i = 0; i < 2; i++) {
      await expect(
        handle.db.selectFrom("conversations").select("id").where("id", "=", "not-a-uuid").execute(),
      ).rejects.toThrow();
    }
    expect(await title()).toBeDefined();
  });
});
