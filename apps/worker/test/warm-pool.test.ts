import { sandboxesRepository, startTasksRepository } from "@tern/db";
import { PoolOwnerLabel, SandboxLabel } from "@tern/sandbox";
import { scaled, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALIVE_TTL_MS, redisKeptSinceKey, workerAliveKey } from "../src/liveness.ts";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

let h: StartHarness;

beforeAll(async () => {
  h = await createStartHarness();
});

afterAll(async () => {
  await h?.close();
});

/** Warm and ready to claim: running, and the pool's warm-up (the empty workspace) done. */
const warmReady = async (owner: string, n: number): Promise<boolean> => {
  const running = (await poolOf(owner)).filter((c) => c.state === "running");
  if (running.length !== n) return false;
  for (const c of running) {
    if ((await h.execIn(nameOf(c), "test -d /workspace/project/.git")).exitCode !== 0) return false;
  }
  return true;
};

/** Containers of one worker's pool (claimed or not: Docker cannot relabel a running container). */
const poolOf = async (owner: string) =>
  (await h.sandboxes()).filter((c) => c.labels[SandboxLabel.Pool] === "1" && c.labels[PoolOwnerLabel] === owner);

const nameOf = (c: { name: string }) => c.name;

/** The container a READY task runs in, from its sandboxes row. */
const containerOfTask = async (taskId: string): Promise<string> => {
  const task = await startTasksRepository(h.database.db).get(uuidOf(taskId));
  expect(task?.status).toBe("READY");
  const row = await sandboxesRepository(h.database.db).findByTask(uuidOf(taskId));
  expect(row?.id).toBe(task?.sandboxId);
  return row?.name ?? "";
};

describe("warm sandbox pool in the worker", () => {
  it("starts take warm containers, one each, recorded for their task; the pool refills; shutdown removes only the unclaimed", async () => {
    const { userId } = await h.newUser();
    // A short janitor interval, so the lock its sweep at start leaves lapses before the next test's.
    const worker = await h.startWorker({ SANDBOX_POOL_SIZE: "2", WORKER_ID: "pool-w1", JANITOR_INTERVAL_MS: "2000" });
    await waitFor(() => warmReady("pool-w1", 2), { what: "two warm containers", intervalMs: 100 });
    const warm = new Set((await poolOf("pool-w1")).map(nameOf));

    const a = await h.enqueueDirect(userId, { title: "a" });
    const b = await h.enqueueDirect(userId, { title: "b" });
    expect((await h.waitForTask(a)).task.status).toBe("READY");
    expect((await h.waitForTask(b)).task.status).toBe("READY");
    const ca = await containerOfTask(a);
    const cb = await containerOfTask(b);
    // Both came from the pool, and never the same one twice.
    expect(warm.has(ca)).toBe(true);
    expect(warm.has(cb)).toBe(true);
    expect(ca).not.toBe(cb);
    // The conversation works in it: the workspace is a git repository.
    expect((await h.execIn(ca, "git -C /workspace/project rev-parse --is-inside-work-tree")).output.trim()).toBe(
      "true",
    );

    // Refilled in the background with new containers.
    await waitFor(async () => (await poolOf("pool-w1")).length === 4, { what: "the pool refilled", intervalMs: 100 });
    const refills = (await poolOf("pool-w1")).map(nameOf).filter((n) => !warm.has(n));
    expect(refills).toHaveLength(2);

    // A graceful stop removes the two unclaimed ones; the claimed ones belong to their conversations.
    expect(await worker.stop()).toBe(0);
    const left = (await poolOf("pool-w1")).map(nameOf).sort();
    expect(left).toEqual([ca, cb].sort());
  });

  it("after a worker crash, another worker's janitor removes the dead worker's warm containers and keeps the claimed one", {
    timeout: scaled(180_000),
  }, async () => {
    const { userId } = await h.newUser();
    // Its janitor's lock lapses one interval after its sweep at start began (or, killed mid-sweep, one
    // interval after it): 2 s, not the default 30 s the janitor below would wait out.
    const crashing = await h.startWorker({ SANDBOX_POOL_SIZE: "2", WORKER_ID: "pool-w2", JANITOR_INTERVAL_MS: "2000" });
    await waitFor(() => warmReady("pool-w2", 2), { what: "two warm containers", intervalMs: 100 });
    const task = await h.enqueueDirect(userId, { title: "claimed" });
    expect((await h.waitForTask(task)).task.status).toBe("READY");
    const claimed = await containerOfTask(task);
    await waitFor(async () => (await poolOf("pool-w2")).length === 3, { what: "the pool refilled", intervalMs: 100 });

    await crashing.kill();
    // Nothing handed back: the warm containers are still there.
    expect(await poolOf("pool-w2")).toHaveLength(3);
    // Its liveness key would expire within its TTL; drop it now instead of waiting for it. And this
    // deployment's Redis has kept its keys for a whole TTL (a missing key proves a worker gone only
    // then): dated back, as a deployment older than the test's few seconds would be.
    await h.redis.del(workerAliveKey(h.prefix, "pool-w2"));
    await h.redis.set(redisKeptSinceKey(h.prefix), String(Date.now() - ALIVE_TTL_MS));

    // The janitor gives a warm container of a worker that is gone a grace period from its creation
    // (POOL_ORPHAN_GRACE_MS: 60 s by default, 5 s here so the test does not wait out a minute).
    await h.startWorker({
      SANDBOX_POOL_SIZE: "0",
      WORKER_ID: "pool-janitor",
      JANITOR_INTERVAL_MS: "2000",
      POOL_ORPHAN_GRACE_MS: "5000",
    });
    await waitFor(async () => (await poolOf("pool-w2")).length === 1, {
      what: "the dead worker's warm containers removed",
      timeoutMs: 150_000,
      intervalMs: 100,
    });
    expect((await poolOf("pool-w2")).map(nameOf)).toEqual([claimed]);
  });
});
