import { newId } from "@tern/core";
import { agentRunOutboxRepository, warmSandboxesRepository } from "@tern/db";
import { createQueues, createRedis, type Queues } from "@tern/queue";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type TestDatabase,
  testRedisUrl,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { relayAgentRunOutbox } from "./warm-rows.ts";

let database: TestDatabase;
let redis: Redis;
let queues: Queues;
let prefix: string;

beforeAll(async () => {
  database = await createTestDatabase();
  prefix = createRedisPrefix();
  redis = createRedis(testRedisUrl(), "worker");
  queues = createQueues(redis, prefix);
});

afterAll(async () => {
  await queues?.close();
  redis?.disconnect();
  await deleteRedisPrefix(prefix);
  await database?.drop();
});

describe("the agent-run outbox of warm claims", () => {
  it("an entry whose enqueue failed stays; the worker's relay enqueues it to its engine's queue, once", async () => {
    const outbox = agentRunOutboxRepository(database.db);
    const conversationId = newId();
    await outbox.add({ conversationId, runId: conversationId, engineId: "engine-x" });
    // The API's own relay failed (Redis away, the API killed after its commit): nothing is lost.
    await expect(
      outbox.relay(async () => {
        throw new Error("redis is away");
      }),
    ).rejects.toThrow("redis is away");
    expect(await database.db.selectFrom("agent_run_outbox").selectAll().execute()).toHaveLength(1);

    // Too recent for the backstop (the API's relay may still be on it): left alone.
    expect(await relayAgentRunOutbox(database.db, queues, { olderThanMs: 60_000 })).toBe(0);
    expect(await relayAgentRunOutbox(database.db, queues, { olderThanMs: 0 })).toBe(1);
    expect(await database.db.selectFrom("agent_run_outbox").selectAll().execute()).toHaveLength(0);
    const jobs = await queues.forEngine("engine-x").agentRun.getJobs(["waiting", "prioritized", "delayed"]);
    expect(jobs.map((j) => j.data)).toEqual([{ conversationId, runId: conversationId }]);
    // Relayed again (a commit lost after the enqueue): still one job, its id is the run's.
    await outbox.add({ conversationId, runId: conversationId, engineId: "engine-x" });
    await relayAgentRunOutbox(database.db, queues, { olderThanMs: 0 });
    expect(await queues.forEngine("engine-x").agentRun.getJobs(["waiting", "prioritized", "delayed"])).toHaveLength(1);
  });

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
