import { randomBytes } from "node:crypto";
import { waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDockerClient } from "../src/docker/engine.ts";
import {
  createSandboxDriver,
  createSandboxPool,
  dockerEngineFromEnv,
  PoolOwnerLabel,
  type SandboxDriver,
  type SandboxInfo,
  SandboxLabel,
  type SandboxPoolOptions,
} from "../src/index.ts";

const engine = dockerEngineFromEnv(process.env);
const docker = createDockerClient(engine);
const namespace = `terntest-pool-${randomBytes(4).toString("hex")}`;
const image = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const network = process.env.SANDBOX_NETWORK ?? "tern-sandboxes";
const driver = createSandboxDriver({ driver: "docker", engine, network });

const options = (ownerId: string, extra: Partial<SandboxPoolOptions> = {}): SandboxPoolOptions => ({
  size: 2,
  namespace,
  ownerId,
  spec: { image, limits: { memoryMb: 256, cpus: 0.5, pids: 128 } },
  ...extra,
});

const mine = (ownerId: string) => driver.list({ [SandboxLabel.Namespace]: namespace, [PoolOwnerLabel]: ownerId });

beforeAll(async () => {
  await driver.prepare();
});

afterAll(async () => {
  for (const c of await driver.list({ [SandboxLabel.Namespace]: namespace })) await driver.destroy(c.ref);
  expect(await driver.list({ [SandboxLabel.Namespace]: namespace })).toEqual([]);
});

describe("warm sandbox pool", () => {
  it("starts `size` containers ahead, running and labelled as pool containers of this worker", async () => {
    const pool = createSandboxPool(driver, options("w-fill", { size: 2 }));
    await pool.start();
    await pool.whenFull();
    const list = await mine("w-fill");
    expect(list).toHaveLength(2);
    for (const c of list) {
      expect(c.state).toBe("running");
      expect(c.labels).toMatchObject({
        [SandboxLabel.Marker]: "1",
        [SandboxLabel.Namespace]: namespace,
        [SandboxLabel.Pool]: "1",
        [PoolOwnerLabel]: "w-fill",
      });
    }
    // A warm container is usable at once: one exec, as the sandbox user.
    const first = list[0] as SandboxInfo;
    const r = await driver.exec(first.ref, { cmd: ["id", "-un"] });
    expect(r.stdout.trim()).toBe("agent");
    await pool.stop();
    expect(await mine("w-fill")).toEqual([]);
  });

  it("hands each container to one claim only, records the owner, and replaces it with a new one", async () => {
    const recorded: { container: string; taskId: string }[] = [];
    const pool = createSandboxPool(
      driver,
      options("w-claim", {
        size: 2,
        onClaim: async (info, owner) => {
          recorded.push({ container: info.name, taskId: owner.taskId });
        },
      }),
    );
    await pool.start();
    await pool.whenFull();
    const warm = new Set((await mine("w-claim")).map((c) => c.ref));

    // Five concurrent start jobs, two warm containers: two get distinct ones, three get none.
    const claims = await Promise.all(
      [1, 2, 3, 4, 5].map((i) => pool.claim({ taskId: `task-${i}`, sandboxId: `sb-${i}` })),
    );
    const got = claims.filter((c): c is SandboxInfo => c !== null);
    expect(got).toHaveLength(2);
    expect(new Set(got.map((c) => c.ref)).size).toBe(2);
    for (const c of got) expect(warm.has(c.ref)).toBe(true);
    expect(recorded.map((r) => r.container).sort()).toEqual(got.map((c) => c.name).sort());

    // Replenished in the background with new containers; the claimed ones never come back.
    await pool.whenFull();
    const claimedIds = new Set(got.map((c) => c.ref));
    const again = await Promise.all([
      pool.claim({ taskId: "t6", sandboxId: "s6" }),
      pool.claim({ taskId: "t7", sandboxId: "s7" }),
    ]);
    for (const c of again) {
      expect(c).not.toBeNull();
      expect(claimedIds.has((c as SandboxInfo).ref)).toBe(false);
    }

    // Stopping removes only what is still unclaimed: claimed containers belong to their conversations.
    await pool.whenFull();
    await pool.stop();
    const left = new Set((await mine("w-claim")).map((c) => c.ref));
    expect(left).toEqual(new Set([...got, ...(again as SandboxInfo[])].map((c) => c.ref)));
    expect(await pool.claim({ taskId: "late", sandboxId: "late" })).toBeNull();
    for (const id of left) await driver.destroy(id);
  });

  it("never gives two workers' pools the same container", async () => {
    const a = createSandboxPool(driver, options("w-a", { size: 2 }));
    const b = createSandboxPool(driver, options("w-b", { size: 2 }));
    await Promise.all([a.start(), b.start()]);
    await Promise.all([a.whenFull(), b.whenFull()]);
    const claims = await Promise.all([a, b, a, b].map((p, i) => p.claim({ taskId: `t${i}`, sandboxId: `s${i}` })));
    const ids = claims.map((c) => (c as SandboxInfo).ref);
    expect(new Set(ids).size).toBe(4);
    expect((claims[0] as SandboxInfo).labels[PoolOwnerLabel]).toBe("w-a");
    expect((claims[1] as SandboxInfo).labels[PoolOwnerLabel]).toBe("w-b");
    await Promise.all([a.stop(), b.stop()]);
    for (const id of ids) await driver.destroy(id);
  });

  it("destroys a container whose ownership could not be recorded, and reports the failure", async () => {
    const pool = createSandboxPool(
      driver,
      options("w-fail", {
        size: 1,
        onClaim: async () => {
          throw new Error("database down");
        },
      }),
    );
    await pool.start();
    await pool.whenFull();
    const [warm] = await mine("w-fail");
    await expect(pool.claim({ taskId: "t", sandboxId: "s" })).rejects.toThrow("database down");
    expect(await driver.inspect((warm as SandboxInfo).ref)).toBeNull();
    await pool.stop();
  });

  it("replaces a warm container that died, and never hands out the dead one", async () => {
    const pool = createSandboxPool(driver, options("w-dead", { size: 1, checkEveryMs: 200 }));
    await pool.start();
    await pool.whenFull();
    const [warm] = await mine("w-dead");
    const deadId = (warm as SandboxInfo).ref;
    await docker.getContainer(deadId).kill();
    await waitFor(
      async () => {
        const list = await mine("w-dead");
        return list.length === 1 && list[0]?.ref !== deadId && list[0]?.state === "running" && pool.available() === 1;
      },
      { what: "the dead warm container to be replaced" },
    );
    const claimed = await pool.claim({ taskId: "t", sandboxId: "s" });
    expect(claimed?.ref).not.toBe(deadId);
    await pool.stop();
    if (claimed) await driver.destroy(claimed.ref);
  });

  it("proves its owner alive with a heartbeat while it runs, and stops beating when stopped", async () => {
    // The pool's timers run on a clock of the test's own: moving it gives the pool every chance
    // to beat, so "no beat after stop" is proven, not hoped for after a sleep.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      let beats = 0;
      const pool = createSandboxPool(
        driver,
        options("w-beat", {
          size: 1,
          heartbeatMs: 50,
          heartbeat: async () => {
            beats++;
          },
        }),
      );
      await pool.start();
      await vi.advanceTimersByTimeAsync(150);
      expect(beats).toBeGreaterThanOrEqual(3);
      await pool.stop();
      const after = beats;
      await vi.advanceTimersByTimeAsync(1_000);
      expect(beats).toBe(after);
    } finally {
      vi.useRealTimers();
    }
  });

  it("prepares each container before it counts as warm, and discards one whose preparation fails", async () => {
    const pool = createSandboxPool(
      driver,
      options("w-prep", {
        size: 1,
        prepare: { cmd: ["bash", "-c", "mkdir -p /workspace/ready && git -C /workspace/ready init -q"] },
      }),
    );
    await pool.start();
    await pool.whenFull();
    const claimed = await pool.claim({ taskId: "t", sandboxId: "s" });
    const r = await driver.exec((claimed as SandboxInfo).ref, { cmd: ["test", "-d", "/workspace/ready/.git"] });
    expect(r.exitCode).toBe(0);
    await pool.stop();
    await driver.destroy((claimed as SandboxInfo).ref);

    // Counted, so the test knows when the pool has tried (and failed) to warm a container twice.
    let removed = 0;
    const counting: SandboxDriver = {
      ...driver,
      destroy: async (id) => {
        await driver.destroy(id);
        removed++;
      },
    };
    const failing = createSandboxPool(counting, options("w-prep-fail", { size: 1, prepare: { cmd: ["false"] } }));
    await failing.start();
    await waitFor(() => removed >= 2, { what: "two failed warm-ups to be removed" });
    expect(failing.available()).toBe(0);
    expect(await failing.claim({ taskId: "t", sandboxId: "s" })).toBeNull();
    await failing.stop();
    // Every failed attempt removed its container.
    expect(await mine("w-prep-fail")).toEqual([]);
  });

  it("with size 0 never creates a container and claims nothing", async () => {
    const pool = createSandboxPool(driver, options("w-zero", { size: 0 }));
    await pool.start();
    expect(await pool.claim({ taskId: "t", sandboxId: "s" })).toBeNull();
    expect(await mine("w-zero")).toEqual([]);
    await pool.stop();
  });
});
