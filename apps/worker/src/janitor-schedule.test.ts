import { createLogger } from "@tern/core";
import { createRedis } from "@tern/queue";
import { createRedisPrefix, deleteRedisPrefix, testRedisUrl, waitFor } from "@tern/testing";
import { afterAll, describe, expect, it } from "vitest";
import { janitorLockKey, startJanitorSchedule } from "./janitor-schedule.ts";

const redis = createRedis(testRedisUrl(), "worker");
const prefixes: string[] = [];

afterAll(async () => {
  redis.disconnect();
  await Promise.all(prefixes.map((p) => deleteRedisPrefix(p)));
});

/**
 * The lock a sweep holds while it runs, read mid-sweep: its TTL is how long a worker killed at that
 * moment would hold every other worker's sweeps off.
 */
const runningLockTtl = async (intervalMs: number): Promise<number> => {
  const prefix = createRedisPrefix();
  prefixes.push(prefix);
  let finish: () => void = () => undefined;
  const swept = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const schedule = startJanitorSchedule({
    redis,
    prefix,
    workerId: "w",
    intervalMs,
    logger: createLogger("test", "silent"),
    sweep: () => swept,
  });
  try {
    const sweep = schedule.tick();
    const key = janitorLockKey(prefix, null);
    const ttl = await waitFor(
      async () => {
        const left = await redis.pttl(key);
        return left > 0 && left;
      },
      { what: "the sweep's lock", timeoutMs: 5_000, intervalMs: 5, inProcess: true },
    );
    finish();
    await sweep;
    return ttl;
  } finally {
    finish();
    await schedule.stop();
  }
};

describe("the janitor's lock while a sweep runs", () => {
  it("lapses one interval after a killed sweeper's last renewal, within 5 and 30 s", async () => {
    // A sweep every second: a killed sweeper holds the others off for 5 s, not 30.
    const short = await runningLockTtl(1_000);
    expect(short).toBeGreaterThan(4_000);
    expect(short).toBeLessThanOrEqual(5_000);
    // The default interval: 30 s, as before.
    expect(await runningLockTtl(30_000)).toBeGreaterThan(25_000);
    // Never longer than 30 s, whatever the interval.
    expect(await runningLockTtl(300_000)).toBeLessThanOrEqual(30_000);
  });
});
