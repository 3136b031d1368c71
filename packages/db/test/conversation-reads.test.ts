import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb } from "../src/connection.ts";
import { conversationReaderOf, conversationsRepository } from "../src/repositories/conversations.ts";
import { usersRepository } from "../src/repositories/users.ts";

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

const conversationsOf = async (userId: string, n: number) => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await createConversationFixture(database.db, { userId })).conversationId);
  return ids;
};

describe("coalesced reads of conversations by id", () => {
  it("never gives one user's conversation to another, though both users' reads share a statement", async () => {
    const alice = (await usersRepository(database.db).create()).id;
    const bob = (await usersRepository(database.db).create()).id;
    const aliceIds = await conversationsOf(alice, 5);
    const bobIds = await conversationsOf(bob, 5);
    const everyId = [...aliceIds, ...bobIds].sort();
    const repo = conversationsRepository(database.db);
    const before = { ...conversationReaderOf(database.db).stats };

    // Each read asks for both users' ids, as a prober would: all of them at once, one statement.
    const readers = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? alice : bob));
    const answers = await Promise.all(readers.map((userId) => repo.findForUser(userId, everyId)));

    const stats = conversationReaderOf(database.db).stats;
    // Positive control: the reads were coalesced, so the statement did load the other user's rows.
    expect(stats.reads - before.reads).toBe(40);
    expect(stats.batches - before.batches).toBe(1);
    for (const [i, found] of answers.entries()) {
      const own = readers[i] === alice ? aliceIds : bobIds;
      expect(found.map((c) => c.id).sort()).toEqual([...own].sort());
      expect(found.every((c) => c.userId === readers[i])).toBe(true);
    }
  });

  it("sees a conversation just written, a session key just revoked and a row just deleted, while reads keep a statement in flight", async () => {
    const userId = (await usersRepository(database.db).create()).id;
    const repo = conversationsRepository(database.db);
    const [busy] = await conversationsOf(userId, 1);
    // Background reads, so that each write below commits while a statement is (most likely) running.
    let stop = false;
    const background = (async () => {
      while (!stop) await Promise.all(Array.from({ length: 8 }, () => repo.findForUser(userId, [busy as string])));
    })();
    try {
      for (let i = 0; i < 20; i++) {
        const { conversationId } = await createConversationFixture(database.db, { userId });
        const [made] = await repo.findForUser(userId, [conversationId]);
        expect(made?.sealedSessionApiKey).toEqual(expect.any(String));

        await repo.revokeSessionKey(conversationId);
        const [revoked] = await repo.findForUser(userId, [conversationId]);
        expect(revoked?.id).toBe(conversationId);
        expect(revoked?.sealedSessionApiKey).toBeNull();

        await sql`delete from conversations where id = ${conversationId}`.execute(database.db);
        expect(await repo.findForUser(userId, [conversationId])).toEqual([]);
      }
    } finally {
      stop = true;
      await background;
    }
  });

  it("answers every read of a statement that fails with the error, then serves the next", async () => {
    const { conversationId, userId } = await createConversationFixture(database.db);
    // A handle of its own with a short statement timeout, and a lock that makes its statement wait past it.
    const handle = createDb(database.url, { max: 2, statementTimeoutMs: 300 });
    const locker = await database.pool.connect();
    try {
      await locker.query("begin");
      await locker.query("lock table conversations in access exclusive mode");
      const repo = conversationsRepository(handle.db);
      const reads = await Promise.allSettled(
        Array.from({ length: 5 }, () => repo.findForUser(userId, [conversationId])),
      );
      expect(conversationReaderOf(handle.db).stats).toEqual({ batches: 1, reads: 5 });
      for (const r of reads) {
        expect(r).toMatchObject({
          status: "rejected",
          reason: { message: expect.stringMatching(/statement timeout/) },
        });
      }
      await locker.query("rollback");
      expect((await repo.findForUser(userId, [conversationId])).map((c) => c.id)).toEqual([conversationId]);
    } finally {
      await locker.query("rollback").catch(() => undefined);
      locker.release();
      await handle.close();
    }
  });

  it("leaves out malformed ids without failing the reads coalesced with them", async () => {
    const { conversationId, userId } = await createConversationFixture(database.db);
    const repo = conversationsRepository(database.db);
    const [bad, good] = await Promise.all([
      repo.findForUser(userId, ["not-a-uuid"]),
      repo.findForUser(userId, [conversationId.toUpperCase()]),
    ]);
    expect(bad).toEqual([]);
    expect(good.map((c) => c.id)).toEqual([conversationId]);
  });
});
