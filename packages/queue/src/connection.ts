import { Redis, type RedisOptions } from "ioredis";

/**
 * Connections for BullMQ. Workers block on Redis, so they need maxRetriesPerRequest null;
 * producers (the API) fail fast instead, so a request answers 503 rather than hanging.
 */
export const createRedis = (url: string, role: "worker" | "producer", extra: RedisOptions = {}): Redis =>
  new Redis(url, {
    maxRetriesPerRequest: role === "worker" ? null : 1,
    enableOfflineQueue: role === "worker",
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    ...extra,
  });
