import { newId } from "@tern/core";
import { warmSandboxesRepository } from "@tern/db";
import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

describe("the upkeep of warm rows", () => {
  it("upkeep drops the rows of a worker gone and claimed rows no run came for; it keeps the rest", async () => {
    const warm = warmSandboxesRepository(database.db);
    const add = async (label: string) => {
      const id = newId();
      await warm.add({
        id,
        name: `tern-pool-${label}-${id}`,
        ref: id,
        engineId: null,
        image: "img",
        spec: "img",
        ownerWorker: "w",
        workspaceDir: "/workspace/project",
        systemPrompt: { text: "p", tools: [] },
        llmModel: null,
      });
      return id;
    };
    const [fresh, stale, claimedNow, claimedLong] = [await add("a"), await add("b"), await add("c"), await add("d")];
    const db = database.db;
    await db
      .updateTable("warm_sandboxes")
      .set({ checked_at: new Date(Date.now() - 3_600_000) })
      .where("id", "=", stale)
      .execute();
    await db.updateTable("warm_sandboxes").set({ claimed_at: new Date() }).where("id", "=", claimedNow).execute();
    await db
      .updateTable("warm_sandboxes")
      .set({ claimed_at: new Date(Date.now() - 2 * 3_600_000) })
      .where("id", "=", claimedLong)
      .execute();
    expect(await warm.removeStale(600_000)).toBe(2);
    const left = (await db.selectFrom("warm_sandboxes").select("id").execute()).map((r) => r.id).sort();
    expect(left).toEqual([fresh, claimedNow].sort());
  });
});
