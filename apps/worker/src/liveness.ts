import type { Redis } from "ioredis";

/**
 * Each worker process proves it is alive with a Redis key that expires. The janitor leaves a warm
 * pool container alone while the worker that made it is alive, and removes it once it is not.
 */
export const workerAliveKey = (prefix: string, workerId: string): string => `${prefix}:worker-alive:${workerId}`;

/** How long a liveness key lives; each worker renews its own every third of it. */
export const ALIVE_TTL_MS = 30_000;

export const markWorkerAlive = async (redis: Redis, prefix: string, workerId: string, ttlMs: number): Promise<void> => {
  await redis.set(workerAliveKey(prefix, workerId), String(Date.now()), "PX", ttlMs);
};

export const isWorkerAlive = async (redis: Redis, prefix: string, workerId: string): Promise<boolean> =>
  (await redis.exists(workerAliveKey(prefix, workerId))) === 1;

/**
 * Since when Redis has held this deployment's keys without a loss: set when first read, and set
 * anew after Redis lost its data (a FLUSHDB, a failover to an empty replica, a restart without
 * persistence). What was written to Redis before it (jobs, liveness keys) may be gone.
 */
export const redisKeptSinceKey = (prefix: string): string => `${prefix}:kept-since`;

export const redisKeptSince = async (redis: Redis, prefix: string): Promise<number> => {
  const key = redisKeptSinceKey(prefix);
  await redis.set(key, String(Date.now()), "NX");
  const since = Number(await redis.get(key));
  return Number.isFinite(since) ? since : Date.now();
};

/**
 * Whether a missing liveness key means its worker is gone. Right after Redis lost its data every
 * key is missing, the live workers' too, until their next renewal: a missing key proves nothing
 * until a whole TTL has passed since the loss (every live worker renewed within it).
 */
export const isLivenessSettled = async (redis: Redis, prefix: string, ttlMs = ALIVE_TTL_MS): Promise<boolean> =>
  Date.now() - (await redisKeptSince(redis, prefix)) >= ttlMs;
