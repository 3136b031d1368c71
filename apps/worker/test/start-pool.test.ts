import { sandboxesRepository } from "@tern/db";
import { PoolOwnerLabel, SandboxLabel } from "@tern/sandbox";
import { type ServiceProcess, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

let h: StartHarness;
let worker: ServiceProcess;

const warm = async () => (await h.sandboxes()).filter((c) => c.labels[SandboxLabel.Pool] === "1");

beforeAll(async () => {
  h = await createStartHarness();
  worker = await h.startWorker({ WORKER_ID: "pooled", SANDBOX_POOL_SIZE: "2", JANITOR_INTERVAL_MS: "1000" });
});

afterAll(async () => {
  await h?.close();
  expect(await h.sandboxes()).toEqual([]);
});

describe("with a warm pool", () => {
  it("a start takes a warm container, the janitor leaves the live worker's pool alone, and SIGTERM removes the rest", async () => {
    // Warm means started and warmed up: the pool makes the empty workspace before it hands a container out.
    // A container may still be starting (exec refused) when listed, so a refusal counts as "not yet".
    const warmedUp = async (name: string) =>
      (await h.execIn(name, "test -d /workspace/project/.git").catch(() => ({ exitCode: -1 }))).exitCode === 0;
    await waitFor(
      async () => {
        const ready = (await warm()).filter((c) => c.state === "running");
        const done = await Promise.all(ready.map((c) => warmedUp(c.name)));
        return ready.length >= 2 && done.every(Boolean);
      },
      { what: "two warmed-up sandboxes", intervalMs: 100 },
    );
    expect((await warm()).map((c) => c.labels[PoolOwnerLabel])).toEqual(["pooled", "pooled"]);

    const { userId } = await h.newUser();
    const taskId = await h.enqueueDirect(userId, {});
    const { task } = await h.waitForTask(taskId);
    const janitor = await h.watchJanitor();
    expect(task.status).toBe("READY");
    const sandbox = await sandboxesRepository(h.database.db).findByTask(task.id);
    expect(sandbox?.name).toMatch(/^tern-pool-/);
    expect(sandbox?.status).toBe("RUNNING");
    const used = (await h.sandboxes()).find((c) => c.name === sandbox?.name);
    expect(used?.state).toBe("running");

    // Two janitor sweeps begun after the claim later, the claimed sandbox (its conversation lives)
    // and the warm ones remain.
    await janitor.after(2);
    const names = (await h.sandboxes()).map((c) => c.name);
    expect(names).toContain(sandbox?.name);
    expect((await warm()).length).toBeGreaterThanOrEqual(2);

    expect(await worker.stop()).toBe(0);
    // Only the claimed one is left: the pool removed its unclaimed containers on the way out.
    expect((await h.sandboxes()).map((c) => c.name)).toEqual([sandbox?.name]);
  });
});
