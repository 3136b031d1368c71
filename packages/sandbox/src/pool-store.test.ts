import { describe, expect, it } from "vitest";
import type { SandboxDriver, SandboxInfo } from "./driver.ts";
import { createSandboxPool } from "./pool.ts";
import type { WarmPoolStore } from "./pool-store.ts";

/** An engine in memory: containers are names; `destroyed` records what the pool removed. */
const fakeDriver = () => {
  const live = new Map<string, SandboxInfo>();
  const destroyed: string[] = [];
  const driver = {
    async create(spec: { name: string; labels: Record<string, string> }) {
      const info: SandboxInfo = {
        ref: spec.name,
        name: spec.name,
        state: "running",
        labels: spec.labels,
        createdAt: new Date().toISOString(),
      };
      live.set(spec.name, info);
      return info;
    },
    async exec() {
      return { exitCode: 0, stdout: "", stderr: "", truncated: false };
    },
    async destroy(ref: string) {
      destroyed.push(ref);
      live.delete(ref);
    },
    async list() {
      return [...live.values()];
    },
  } as unknown as SandboxDriver;
  return { driver, live, destroyed };
};

/** The rows in memory, with a claim from elsewhere (the API's transaction) as `claimElsewhere`. */
const memoryStore = () => {
  const rows = new Map<string, "free" | "elsewhere">();
  const store: WarmPoolStore = {
    async add(info) {
      rows.set(info.name, "free");
    },
    async take(info) {
      if (rows.get(info.name) !== "free") return false;
      rows.delete(info.name);
      return true;
    },
    async unclaimed() {
      return new Set([...rows].filter(([, s]) => s === "free").map(([n]) => n));
    },
    async touch() {},
    async removeAll() {
      for (const [n, s] of rows) if (s === "free") rows.delete(n);
    },
  };
  const claimElsewhere = (): string | null => {
    const free = [...rows].find(([, s]) => s === "free");
    if (!free) return null;
    rows.set(free[0], "elsewhere");
    return free[0];
  };
  return { store, rows, claimElsewhere };
};

const until = async (what: string, ok: () => boolean, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe("a pool with a store (warm rows others claim)", () => {
  it("leaves a sandbox claimed elsewhere to its conversation, refills at once, never hands it out or removes it", async () => {
    const { driver, live, destroyed } = fakeDriver();
    const { store, rows, claimElsewhere } = memoryStore();
    const pool = createSandboxPool(driver, {
      size: 2,
      namespace: "t",
      ownerId: "w1",
      spec: { image: "img", limits: {} as never },
      store,
      syncMs: 20,
    });
    await pool.start();
    await pool.whenFull(5_000);
    expect(rows.size).toBe(2);

    const taken = claimElsewhere() as string;
    // The pool sees the claim on its next sync, drops the entry and makes another.
    await until("the pool to refill", () => [...rows.values()].filter((s) => s === "free").length === 2);
    expect(live.size).toBe(3);

    // Its own claims never get the sandbox claimed elsewhere.
    const mine = [
      await pool.claim({ taskId: "t1", sandboxId: "s1" }),
      await pool.claim({ taskId: "t2", sandboxId: "s2" }),
    ];
    expect(mine.map((m) => m?.name)).not.toContain(taken);
    expect(new Set(mine.map((m) => m?.name)).size).toBe(2);

    // A claim elsewhere between the pool's sync and its own claim: the take refuses it, the pool moves on.
    await pool.whenFull(5_000);
    const raced = claimElsewhere() as string;
    const next = await pool.claim({ taskId: "t3", sandboxId: "s3" });
    expect(next?.name).not.toBe(raced);

    await pool.stop();
    // Shutdown removes only what is still the pool's.
    expect(destroyed).not.toContain(taken);
    expect(destroyed).not.toContain(raced);
    expect(live.has(taken)).toBe(true);
    expect(live.has(raced)).toBe(true);
  });
});
