import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startPeriodicTask } from "./periodic.ts";

/** A tick that waits until released, counting its starts, and how many ran at once at most. */
const gatedTick = () => {
  let starts = 0;
  let inFlight = 0;
  let mostAtOnce = 0;
  let release: (() => void) | null = null;
  const tick = async () => {
    starts++;
    inFlight++;
    mostAtOnce = Math.max(mostAtOnce, inFlight);
    await new Promise<void>((r) => {
      release = r;
    });
    inFlight--;
  };
  return {
    tick,
    starts: () => starts,
    mostAtOnce: () => mostAtOnce,
    release: () => {
      release?.();
      release = null;
    },
  };
};

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe("startPeriodicTask", () => {
  it("ticks at once, then everyMs after each tick ended, one at a time", async () => {
    const g = gatedTick();
    const task = startPeriodicTask("sweep", g.tick, { everyMs: 1_000 });
    await vi.advanceTimersByTimeAsync(0);
    expect(g.starts()).toBe(1);
    // A slow tick: no second one starts while it runs, however long it takes.
    await vi.advanceTimersByTimeAsync(5_000);
    expect(g.starts()).toBe(1);
    g.release();
    await vi.advanceTimersByTimeAsync(999);
    expect(g.starts()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(g.starts()).toBe(2);
    expect(g.mostAtOnce()).toBe(1);
    g.release();
    await task.stop();
  });

  it("waits firstAfterMs before the first tick, and asks everyMs before each pause", async () => {
    let ticks = 0;
    const pauses = [100, 200, 400];
    const task = startPeriodicTask("refresh", async () => void ticks++, {
      firstAfterMs: 50,
      everyMs: () => pauses.shift() ?? 1_000,
    });
    await vi.advanceTimersByTimeAsync(49);
    expect(ticks).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(ticks).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(ticks).toBe(2);
    await vi.advanceTimersByTimeAsync(199);
    expect(ticks).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(ticks).toBe(3);
    await task.stop();
  });

  it("logs a tick that throws as a lapse, with its error, and goes on ticking", async () => {
    const warn = vi.fn();
    let ticks = 0;
    const boom = new Error("redis down");
    const task = startPeriodicTask(
      "webhook outbox sweep",
      async () => {
        ticks++;
        if (ticks === 1) throw boom;
      },
      { everyMs: 10, logger: { warn } },
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(warn).toHaveBeenCalledExactlyOnceWith(
      { err: boom, task: "webhook outbox sweep" },
      "webhook outbox sweep failed",
    );
    await vi.advanceTimersByTimeAsync(10);
    expect(ticks).toBe(2);
    expect(warn).toHaveBeenCalledTimes(1);
    await task.stop();
  });

  it("hands a lapse to onLapse instead of the log", async () => {
    const warn = vi.fn();
    const lapses: unknown[] = [];
    const task = startPeriodicTask(
      "disk watch",
      () => {
        throw new Error("list failed");
      },
      { everyMs: 10, logger: { warn }, onLapse: (err) => lapses.push(err) },
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(lapses).toHaveLength(1);
    expect(warn).not.toHaveBeenCalled();
    await task.stop();
  });

  it("tickNow runs a tick at once when idle, and the regular pause starts again after it", async () => {
    let ticks = 0;
    const task = startPeriodicTask("look", async () => void ticks++, { everyMs: 1_000 });
    await vi.advanceTimersByTimeAsync(600);
    expect(ticks).toBe(1);
    await task.tickNow();
    expect(ticks).toBe(2);
    // 600 ms after the first tick's pause began: no tick is due yet, since tickNow restarted it.
    await vi.advanceTimersByTimeAsync(600);
    expect(ticks).toBe(2);
    await vi.advanceTimersByTimeAsync(400);
    expect(ticks).toBe(3);
    await task.stop();
  });

  it("tickNow while a tick runs: every ask shares one tick right after it", async () => {
    const g = gatedTick();
    const task = startPeriodicTask("look", g.tick, { everyMs: 60_000 });
    await vi.advanceTimersByTimeAsync(0);
    expect(g.starts()).toBe(1);
    const asks = [task.tickNow(), task.tickNow(), task.tickNow()];
    expect(asks[1]).toBe(asks[0]);
    g.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(g.starts()).toBe(2);
    let answered = false;
    void Promise.all(asks).then(() => {
      answered = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(answered).toBe(false);
    g.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(answered).toBe(true);
    expect(g.mostAtOnce()).toBe(1);
    await task.stop();
  });

  it("tickNow on a failing tick resolves: the failure is a lapse, not the asker's", async () => {
    const warn = vi.fn();
    const task = startPeriodicTask(
      "look",
      async () => {
        throw new Error("no redis");
      },
      { everyMs: 60_000, firstAfterMs: 60_000, logger: { warn } },
    );
    await expect(task.tickNow()).resolves.toBeUndefined();
    expect(warn).toHaveBeenCalledTimes(1);
    await task.stop();
  });

  it("stop waits for the tick under way, and no tick starts after it", async () => {
    const g = gatedTick();
    const task = startPeriodicTask("upkeep", g.tick, { everyMs: 10 });
    await vi.advanceTimersByTimeAsync(0);
    let stopped = false;
    const stopping = task.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(stopped).toBe(false);
    g.release();
    await stopping;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(g.starts()).toBe(1);
    await task.tickNow();
    expect(g.starts()).toBe(1);
  });
});
