import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";

export const testRedisUrl = (): string =>
  process.env.TEST_REDIS_URL ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** A key prefix of the caller's own; BullMQ and everything else of a test file live under it. */
export const createRedisPrefix = (): string => `terntest:${randomBytes(5).toString("hex")}`;

/** Deletes every key under `prefix`. */
export const deleteRedisPrefix = async (prefix: string, url = testRedisUrl()): Promise<void> => {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
};
