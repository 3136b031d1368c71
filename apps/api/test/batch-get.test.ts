import { toHexId } from "@tern/core";
import { conversationReaderOf } from "@tern/db";
import { createConversationFixture } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => api?.close());

type Found = { id: string; created_by_user_id: string; session_api_key: string | null } | null;

const batchGet = async (ids: string[], headers: { key: string } | { headers: Record<string, string> }) => {
  const res = await api.call(`/api/v1/app-conversations?${ids.map((id) => `ids=${id}`).join("&")}`, headers);
  expect(res.status).toBe(200);
  return (await res.json()) as Found[];
};

describe("GET /api/v1/app-conversations, its reads coalesced", () => {
  it("answers concurrent GETs of two users, read in shared statements, each with its own conversations only", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const aliceIds: string[] = [];
    const bobIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      aliceIds.push((await createConversationFixture(api.database.db, { userId: alice.userId })).conversationId);
      bobIds.push((await createConversationFixture(api.database.db, { userId: bob.userId })).conversationId);
    }
    const aliceSession = await createConversationFixture(api.database.db, { userId: alice.userId });
    const every = [...aliceIds, ...bobIds, aliceSession.conversationId].map(toHexId);
    const callers = [
      { who: alice.userId, auth: { key: alice.key }, sees: [...aliceIds, aliceSession.conversationId] },
      { who: bob.userId, auth: { key: bob.key }, sees: bobIds },
      // A session key reads its own conversation only, even among its user's.
      {
        who: alice.userId,
        auth: { headers: { "x-session-api-key": aliceSession.sessionApiKey } },
        sees: [aliceSession.conversationId],
      },
    ];
    const before = { ...conversationReaderOf(api.database.db).stats };

    const rounds = 10;
    const answers = await Promise.all(
      Array.from({ length: rounds * callers.length }, async (_, i) => {
        const caller = callers[i % callers.length] as (typeof callers)[number];
        return { caller, found: await batchGet(every, caller.auth) };
      }),
    );

    const stats = conversationReaderOf(api.database.db).stats;
    // Positive control: the GETs shared statements, so each statement loaded both users' rows.
    expect(stats.reads - before.reads).toBe(rounds * callers.length);
    expect(stats.batches - before.batches).toBeLessThan(stats.reads - before.reads);
    for (const { caller, found } of answers) {
      const expected = every.map((hex) => (caller.sees.map(toHexId).includes(hex) ? hex : null));
      expect(found.map((c) => c?.id ?? null)).toEqual(expected);
      for (const c of found) if (c) expect(c.created_by_user_id).toBe(toHexId(caller.who));
    }
  });

  it("sees a conversation written just before, and its DELETE, while other GETs keep reads in flight", async () => {
    const user = await api.newUser();
    const busy = toHexId((await createConversationFixture(api.database.db, { userId: user.userId })).conversationId);
    let stop = false;
    const background = (async () => {
      while (!stop) await Promise.all(Array.from({ length: 4 }, () => batchGet([busy], { key: user.key })));
    })();
    try {
      for (let i = 0; i < 5; i++) {
        const id = toHexId((await createConversationFixture(api.database.db, { userId: user.userId })).conversationId);
        const [made] = await batchGet([id], { key: user.key });
        expect(made?.id).toBe(id);
        expect(made?.session_api_key).toEqual(expect.any(String));
        // DELETE ends the conversation's session key at once (its sandbox, if any, goes later).
        expect((await api.call(`/api/v1/app-conversations/${id}`, { key: user.key, method: "DELETE" })).status).toBe(
          200,
        );
        const [deleted] = await batchGet([id], { key: user.key });
        expect(deleted?.session_api_key).toBeNull();
      }
    } finally {
      stop = true;
      await background;
    }
  });
});
