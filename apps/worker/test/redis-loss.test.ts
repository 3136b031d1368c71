import { sandboxesRepository, startTasksRepository } from "@tern/db";
import { PoolOwnerLabel, SandboxLabel } from "@tern/sandbox";
import { deleteRedisPrefix, type ServiceProcess, scaled, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

/**
 * Redis losing its data (a FLUSHDB, a failover to an empty replica, a restart without persistence)
 * takes the jobs, the liveness keys and any schedule stored there. The workers' own timers bring
 * the janitor back, which re-creates the lost jobs; live workers' warm sandboxes are not orphans.
 * The loss is the deletion of every key of this file's prefix (the Redis is shared with other tests).
 */

let h: StartHarness;
let api: ServiceProcess;
let key: string;

const JANITOR_INTERVAL_MS = 1_000;
const env = (id: string, poolSize: number) => ({
  WORKER_ID: id,
  SANDBOX_POOL_SIZE: String(poolSize),
  JANITOR_INTERVAL_MS: String(JANITOR_INTERVAL_MS),
  // A warm sandbox whose owner looks gone is removed one second after its creation.
  POOL_ORPHAN_GRACE_MS: "1000",
});

const REPO = "acme/redis-loss";

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo(REPO, { "README.md": "redis loss\n" });
  api = await h.startApi();
  ({ key } = await h.newUser());
});

afterAll(async () => {
  await h?.close();
  expect(await h.sandboxes()).toEqual([]);
});

const poolOf = async (owner: string) =>
  (await h.sandboxes()).filter((c) => c.labels[SandboxLabel.Pool] === "1" && c.labels[PoolOwnerLabel] === owner);

/** A pool's sandboxes no conversation claimed (the claimed ones keep their pool labels). */
const unclaimedOf = async (owner: string) => {
  const rows = sandboxesRepository(h.database.db);
  const all = await poolOf(owner);
  const claimed = await Promise.all(all.map(async (c) => (await rows.findByName(c.name)) !== null));
  return all.filter((_, i) => !claimed[i]);
};

/** `n` warm sandboxes, each older than the orphan grace (so only liveness keeps them). */
const waitForAgedPool = async (owner: string, n: number) =>
  waitFor(
    async () => {
      const warm = (await unclaimedOf(owner)).filter((c) => c.state === "running");
      return warm.length === n && warm.every((c) => Date.now() - Date.parse(c.createdAt) > 1_500) && warm;
    },
    { what: `${n} warm sandboxes of ${owner}, older than the grace`, intervalMs: 100 },
  );

const startConversations = async (n: number): Promise<string[]> => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    // With a repository: such a start goes through the queue (a warm claim in the API serves only
    // starts without one), which is what losing Redis's data can take.
    const res = await h.post(api, key, { title: `redis-loss ${i}`, selected_repository: REPO });
    expect(res.status).toBeLessThan(300);
    ids.push(uuidOf(((await res.json()) as { id: string }).id));
  }
  return ids;
};

const loseRedisData = async () => {
  await deleteRedisPrefix(h.prefix);
  expect(await h.redis.keys(`${h.prefix}:*`)).toEqual([]);
};

const freeze = (p: ServiceProcess) => process.kill(p.pid, "SIGSTOP");
const thaw = (p: ServiceProcess) => process.kill(p.pid, "SIGCONT");

/** Every task READY by `deadline` (ms since the epoch). */
const expectAllReadyBy = async (ids: string[], deadline: number) => {
  for (const id of ids) {
    const { task, seen } = await h.waitForTask(id, Math.max(1, deadline - Date.now()));
    expect(task.status, `task ${id} seen ${seen.join(" > ")}`).toBe("READY");
  }
};

describe("Redis loses its data", () => {
  /**
   * A worker with a pool and one without, started by whichever test needs them first (or again,
   * after a test stopped them): each test sets up what it needs, alone (-t) or retried.
   */
  let pair: { pooled: ServiceProcess; plain: ServiceProcess } | undefined;
  const workers = async () => {
    pair ??= { pooled: await h.startWorker(env("rl-pooled", 2)), plain: await h.startWorker(env("rl-plain", 0)) };
    return pair;
  };

  it("while one worker is frozen: the other re-creates the lost jobs, and leaves the frozen worker's warm sandboxes alone", {
    timeout: scaled(120_000),
  }, async () => {
    const { pooled, plain } = await workers();
    const warmBefore = (await waitForAgedPool("rl-pooled", 2)).map((c) => c.name).sort();

    freeze(pooled);
    freeze(plain);
    try {
      const ids = await startConversations(3);
      for (const id of ids) expect((await startTasksRepository(h.database.db).get(id))?.status).toBe("WORKING");
      await loseRedisData();
      const janitor = await h.watchJanitor();
      thaw(plain);
      const thawedAt = Date.now();
      await expectAllReadyBy(ids, thawedAt + JANITOR_INTERVAL_MS + 10_000);
      // Sweeps ran while the pooled worker's liveness key was gone, its warm sandboxes older than the
      // grace: a missing key right after a loss proves nothing, and they are kept.
      await janitor.after(2);
      expect((await unclaimedOf("rl-pooled")).map((c) => c.name).sort()).toEqual(warmBefore);
    } finally {
      thaw(pooled);
      thaw(plain);
    }
    // Thawed, the pooled worker renews its key and serves from its pool as before.
    const janitor = await h.watchJanitor();
    await janitor.after(2);
    expect((await unclaimedOf("rl-pooled")).map((c) => c.name).sort()).toEqual(warmBefore);
  });

  it("while every worker is frozen: once thawed, every task in flight ends READY within JANITOR_INTERVAL_MS + 10 s", {
    timeout: scaled(120_000),
  }, async () => {
    const { pooled, plain } = await workers();
    await waitForAgedPool("rl-pooled", 2);
    freeze(pooled);
    freeze(plain);
    let ids: string[] = [];
    try {
      ids = await startConversations(4);
      await loseRedisData();
    } finally {
      thaw(pooled);
      thaw(plain);
    }
    const thawedAt = Date.now();
    await expectAllReadyBy(ids, thawedAt + JANITOR_INTERVAL_MS + 10_000);
    // The janitor's schedule came back with the workers' timers: it sweeps on.
    const janitor = await h.watchJanitor();
    await janitor.after(1);
    pair = undefined;
    expect(await pooled.stop()).toBe(0);
    expect(await plain.stop()).toBe(0);
  });
});

describe("a worker killed with SIGKILL and restarted under the same WORKER_ID", () => {
  it("removes the warm sandboxes its predecessor left, keeps the claimed one, and runs no more than its pool", {
    timeout: scaled(120_000),
  }, async () => {
    const first = await h.startWorker(env("rl-restarted", 2));
    await waitForAgedPool("rl-restarted", 2);
    const [taskId] = await startConversations(1);
    expect((await h.waitForTask(taskId!)).task.status).toBe("READY");
    const claimed = (await sandboxesRepository(h.database.db).findByTask(taskId!))?.name;
    expect(claimed).toMatch(/^tern-pool-/);
    const left = (await waitForAgedPool("rl-restarted", 2)).map((c) => c.name);

    await first.kill();
    // Nothing handed back: its warm sandboxes are still there, and the restarted worker's
    // liveness key will make them look owned.
    expect((await unclaimedOf("rl-restarted")).map((c) => c.name).sort()).toEqual([...left].sort());

    await h.startWorker(env("rl-restarted", 2));
    // Removed while it started, before it was ready.
    const now = (await poolOf("rl-restarted")).map((c) => c.name);
    for (const name of left) expect(now).not.toContain(name);
    expect(now).toContain(claimed);
    // It refills to its size, and never past it.
    await waitFor(
      async () => {
        const unclaimed = await unclaimedOf("rl-restarted");
        expect(unclaimed.length).toBeLessThanOrEqual(2);
        return unclaimed.filter((c) => c.state === "running").length === 2;
      },
      { what: "the restarted worker's pool refilled", intervalMs: 100 },
    );
    expect((await poolOf("rl-restarted")).map((c) => c.name)).toContain(claimed);
  });
});
