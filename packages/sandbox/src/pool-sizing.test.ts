import { waitFor } from "@tern/testing";
import { describe, expect, it } from "vitest";
import type { SandboxDriver, SandboxInfo } from "./driver.ts";
import { createSandboxPool } from "./pool.ts";
import { createArrivalRate, createRefillEstimate, poolTarget } from "./pool-sizing.ts";

describe("poolTarget", () => {
  const base = { min: 2, max: 16, safety: 2 };

  it("keeps the floor at rest, before any refill was measured, and while one refill keeps up", () => {
    expect(poolTarget({ ...base, ratePerSec: 0, refillMs: 500 })).toBe(2);
    expect(poolTarget({ ...base, ratePerSec: 10, refillMs: null })).toBe(2);
    // 1 start/s, 0.5 s per refill: 1 needed with its head room, below the floor.
    expect(poolTarget({ ...base, ratePerSec: 1, refillMs: 500 })).toBe(2);
  });

  it("grows with rate × refill time × safety, rounded up, up to the maximum", () => {
    // 4/s × 0.5 s × 2 = 4.
    expect(poolTarget({ ...base, ratePerSec: 4, refillMs: 500 })).toBe(4);
    // 3/s × 0.7 s × 2 = 4.2 → 5.
    expect(poolTarget({ ...base, ratePerSec: 3, refillMs: 700 })).toBe(5);
    expect(poolTarget({ ...base, ratePerSec: 100, refillMs: 500 })).toBe(16);
  });

  it("never goes below the floor, even with a maximum under it", () => {
    expect(poolTarget({ ...base, max: 1, ratePerSec: 100, refillMs: 500 })).toBe(2);
  });
});

describe("createArrivalRate", () => {
  it("reads a steady rate as itself after a second, and decays once arrivals stop", () => {
    const rate = createArrivalRate({ windowMs: 30_000 });
    expect(rate.perSec(0)).toBe(0);
    // 4 per second for 10 s.
    for (let t = 0; t <= 10_000; t += 250) rate.record(t);
    expect(rate.perSec(10_000)).toBeGreaterThan(3.8);
    expect(rate.perSec(10_000)).toBeLessThan(4.3);
    // A window later with no arrival, it has decayed to about a third; after five, to nearly nothing.
    expect(rate.perSec(40_000)).toBeLessThan(2);
    expect(rate.perSec(160_000)).toBeLessThan(0.1);
  });

  it("reads one arrival alone as one per second at most, not as an arbitrary rate", () => {
    const rate = createArrivalRate({ windowMs: 30_000 });
    rate.record(5_000);
    expect(rate.perSec(5_000)).toBeCloseTo(1, 1);
  });

  it("estimates a refill as its average plus two mean deviations, so slow ones count", () => {
    const refill = createRefillEstimate(0.5);
    expect(refill.get()).toBeNull();
    // The first sample alone: itself, plus half of it twice over (nothing is known of its spread yet).
    refill.add(400);
    expect(refill.get()).toBe(800);
    // Steady samples: the deviation halves each time and the estimate closes in on them.
    for (let i = 0; i < 20; i++) refill.add(400);
    expect(refill.get()).toBeCloseTo(400, 0);
    // One slow refill lifts it by more than its share of the mean.
    refill.add(1_200);
    // mean 800, deviation (800 - 0) / 2 = 400: 800 + 2 × 400.
    expect(refill.get()).toBeCloseTo(1_600, 0);
  });
});

/**
 * A driver whose sandboxes are entries in a map. A create waits until the test finishes it
 * (`finish(advanceMs)` moves the test's clock, then completes every create waiting), so the pool's
 * refill times, like its arrivals, are the test's own. Destroys are recorded with the clock's time.
 */
const fakeDriver = (clock: { t: number }) => {
  const live = new Map<string, SandboxInfo>();
  const waiting: (() => void)[] = [];
  const destroyedAt: number[] = [];
  const driver = {
    create: async (spec: { name: string; labels?: Record<string, string> }) => {
      await new Promise<void>((r) => waiting.push(r));
      const info: SandboxInfo = {
        ref: spec.name,
        name: spec.name,
        state: "running",
        labels: spec.labels ?? {},
        createdAt: new Date().toISOString(),
      };
      live.set(spec.name, info);
      return info;
    },
    exec: async () => ({ exitCode: 0, stdout: "", stderr: "" }),
    destroy: async (ref: string) => {
      if (live.delete(ref)) destroyedAt.push(clock.t);
    },
    list: async () => [...live.values()],
  } as unknown as SandboxDriver;
  return {
    driver,
    live,
    destroyedAt,
    waiting: () => waiting.length,
    finish(advanceMs: number) {
      clock.t += advanceMs;
      for (const r of waiting.splice(0)) r();
    },
  };
};

const spec = { image: "none", limits: { memoryMb: 256, cpus: 0.5, pids: 64 } };

/** A self-sizing pool (floor 2) on `driver`, started and filled to its floor, one 500 ms create at a time. */
const filledPool = async (
  driver: SandboxDriver,
  fake: ReturnType<typeof fakeDriver>,
  clock: { t: number },
  opts: { max: number; parallelCreates: number },
) => {
  const pool = createSandboxPool(driver, {
    size: 2,
    namespace: "sizing",
    ownerId: "w",
    spec,
    sizing: { windowMs: 10_000, safety: 2, shrinkAfterMs: 60_000 },
    now: () => clock.t,
    ...opts,
  });
  await pool.start();
  for (let i = 0; i < 2; i++) {
    await waitFor(() => fake.waiting() === 1, { what: `warm-up create ${i + 1}`, intervalMs: 5 });
    fake.finish(500);
  }
  await pool.whenFull();
  return pool;
};

describe("a pool sizing itself from the arrival rate", () => {
  it("grows with a steady rate (up to its maximum), then shrinks back to its floor one sandbox at a time", async () => {
    const clock = { t: 0 };
    const fake = fakeDriver(clock);
    // The floor, one create at a time, each taking 500 ms on the test's clock.
    const pool = await filledPool(fake.driver, fake, clock, { max: 6, parallelCreates: 6 });
    expect(fake.live.size).toBe(2);
    expect(pool.target()).toBe(2);

    // 2.8 starts/s for 7 s, none of the new creates finished. A refill is estimated at 850 ms (500 ms
    // plus two deviations, after two samples), so 2.8/s × 0.85 s × safety 2 = 4.8 → 5 warm needed,
    // made at once (what the target lacks; the first claims read a little faster), not one after another.
    let hits = 0;
    for (let i = 0; i < 20; i++) {
      if (await pool.claim({ taskId: `t${i}`, sandboxId: `s${i}` })) hits++;
      clock.t += 350;
    }
    expect(hits).toBe(2);
    expect(pool.target()).toBe(5);
    await waitFor(() => fake.waiting() >= 5, { what: "five creates at once", intervalMs: 5 });
    expect(fake.waiting()).toBeLessThanOrEqual(6);

    // Those creates took the whole burst (7 s) on the clock: the target reaches the maximum, and the
    // pool fills to it, never beyond.
    await waitFor(
      () => {
        fake.finish(0);
        return pool.available() === 6 && fake.waiting() === 0;
      },
      { what: "the pool at its maximum", intervalMs: 5 },
    );
    expect(pool.target()).toBe(6);
    expect(fake.live.size - hits).toBe(6);
    expect(fake.destroyedAt).toEqual([]);

    // No more starts: the target falls to the floor as the rate decays; the surplus goes once it has
    // been unneeded for 60 s, one sandbox per 60 s, and never below the floor.
    clock.t += 60_000;
    expect(pool.target()).toBe(2);
    const surplusFrom = clock.t;
    await waitFor(
      () => {
        clock.t += 1_000;
        return pool.available() === 2;
      },
      { what: "the pool back at its floor", intervalMs: 10 },
    );
    expect(fake.destroyedAt).toHaveLength(4);
    expect(fake.destroyedAt[0]).toBeGreaterThanOrEqual(surplusFrom + 60_000);
    for (let i = 1; i < 4; i++) {
      expect((fake.destroyedAt[i] as number) - (fake.destroyedAt[i - 1] as number)).toBeGreaterThanOrEqual(60_000);
    }
    expect(fake.live.size - hits).toBe(2);

    await pool.stop();
    // Stopping removes the warm ones; claimed ones belong to their conversations.
    expect(fake.live.size).toBe(hits);
  });

  it("grows by at most `parallelCreates` creates at once, however much the target lacks", async () => {
    const clock = { t: 0 };
    const fake = fakeDriver(clock);
    let most = 0;
    const counted = {
      ...fake.driver,
      create: async (s: Parameters<SandboxDriver["create"]>[0]) => {
        most = Math.max(most, fake.waiting() + 1);
        return fake.driver.create(s);
      },
    } as SandboxDriver;
    const pool = await filledPool(counted, fake, clock, { max: 8, parallelCreates: 2 });
    // As in the test above: 2.8/s for 7 s takes the target to 5, with the pool empty.
    for (let i = 0; i < 20; i++) {
      await pool.claim({ taskId: `t${i}`, sandboxId: `s${i}` });
      clock.t += 350;
    }
    expect(pool.target()).toBe(5);
    await waitFor(() => fake.waiting() >= 2, { what: "creates begun", intervalMs: 5 });
    // Each pair finished lets the next pair begin, never more, until the pool has its target.
    await waitFor(
      () => {
        fake.finish(0);
        return pool.available() >= 5;
      },
      { what: "the pool at its target", intervalMs: 5 },
    );
    expect(most).toBe(2);
    await pool.stop();
  });

  it("with no maximum above its size keeps that size whatever the rate", async () => {
    const clock = { t: 0 };
    const fake = fakeDriver(clock);
    const pool = createSandboxPool(fake.driver, {
      size: 2,
      namespace: "fixed",
      ownerId: "w",
      spec,
      now: () => clock.t,
    });
    await pool.start();
    await waitFor(
      () => {
        fake.finish(500);
        return pool.available() === 2;
      },
      { what: "the pool full", intervalMs: 5 },
    );
    for (let i = 0; i < 50; i++) {
      await pool.claim({ taskId: `t${i}`, sandboxId: `s${i}` });
      clock.t += 20;
    }
    expect(pool.target()).toBe(2);
    // One create at a time, as a fixed pool always made them.
    await waitFor(() => fake.waiting() === 1, { what: "a refill", intervalMs: 5 });
    expect(fake.waiting()).toBe(1);
    await waitFor(
      () => {
        fake.finish(500);
        return pool.available() === 2 && fake.waiting() === 0;
      },
      { what: "the pool refilled", intervalMs: 5 },
    );
    await pool.stop();
  });
});
