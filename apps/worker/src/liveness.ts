import type { Redis } from "ioredis";

/**
 * Each worker process proves it is alive with a Redis key that expires. The janitor leaves a warm
 * pool container alone while the worker that made it is alive, and removes it once it is not.
 */
export const workerAliveKey = (prefix: string, workerId: string): string => `${prefix}:worker-alive:${workerId}`;

export const markWorkerAlive = async (redis: Redis, prefix: string, workerId: string, ttlMs: number): Promise<void> => {
  await redis.set(workerAliveKey(prefix, workerId), String(Date.now()), "PX", ttlMs);
};

export const isWorkerAlive = async (redis: Redis, prefix: string, workerId: string): Promise<boolean> =>
  (await redis.exists(workerAliveKey(prefix, workerId))) === 1;
