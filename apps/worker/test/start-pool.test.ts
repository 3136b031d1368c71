import { sandboxesRepository } from "@tern/db";
import { PoolOwnerLabel, SandboxLabel } from "@tern/sandbox";
import type { ServiceProcess } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

let h: StartHarness;
let worker: ServiceProcess;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const warm = async () => (await h.containers()).filter((c) => c.Labels[SandboxLabel.Pool] === "1");

beforeAll(async () => {
  h = await createStartHarness();
  worker = await h.startWorker({ WORKER_ID: "pooled", SANDBOX_POOL_SIZE: "2", JANITOR_INTERVAL_MS: "1000" });
});

afterAll(async () => {
  await h?.close();
  expect(await h.containers()).toEqual([]);
});

describe("with a warm pool", () => {
  it("a start takes a warm container, the janitor leaves the live worker's pool alone, and SIGTERM removes the rest", async () => {
    // Warm means started and warmed up: the pool makes the empty workspace before it hands a container out.
    // A container may still be starting (exec refused) when listed, so a refusal counts as "not yet".
    const warmedUp = async (name: string) =>
      (await h.execIn(name, "test -d /workspace/project/.git").catch(() => ({ exitCode: -1 }))).exitCode === 0;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = (await warm()).filter((c) => c.State === "running");
      const done = await Promise.all(ready.map((c) => warmedUp(c.Names[0]?.slice(1) ?? "")));
      if ((ready.length >= 2 && done.every(Boolean)) || Date.now() > deadline) break;
      await sleep(100);
    }
    expect((await warm()).map((c) => c.Labels[PoolOwnerLabel])).toEqual(["pooled", "pooled"]);

    const { userId } = await h.newUser();
    const taskId = await h.enqueueDirect(userId, {});
    const { task } = await h.waitForTask(taskId);
    expect(task.status).toBe("READY");
    const sandbox = await sandboxesRepository(h.database.db).findByTask(task.id);
    expect(sandbox?.containerName).toMatch(/^tern-pool-/);
    expect(sandbox?.status).toBe("RUNNING");
    const used = (await h.containers()).find((c) => c.Names[0] === `/${sandbox?.containerName}`);
    expect(used?.State).toBe("running");

    // Several janitor rounds later, the claimed container (its conversation lives) and the warm ones remain.
    await sleep(2500);
    const names = (await h.containers()).map((c) => c.Names[0]);
    expect(names).toContain(`/${sandbox?.containerName}`);
    expect((await warm()).length).toBeGreaterThanOrEqual(2);

    expect(await worker.stop()).toBe(0);
    // Only the claimed one is left: the pool removed its unclaimed containers on the way out.
    expect((await h.containers()).map((c) => c.Names[0])).toEqual([`/${sandbox?.containerName}`]);
  });
});
