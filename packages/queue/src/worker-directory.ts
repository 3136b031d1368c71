import type { Redis } from "ioredis";

/**
 * Where the workers' internal HTTP servers are. The API never talks to the sandbox engine: a read
 * that needs a sandbox (a file, later a diff or an archive) is served by a worker, which the API
 * finds here. Each worker advertises itself with a key that expires unless renewed (its
 * heartbeat), indexed in a sorted set by expiry so the live ones are one range read away.
 */
export interface WorkerEndpoint {
  workerId: string;
  /** Base URL of its internal HTTP server, as other hosts reach it (WORKER_ADVERTISE_URL). */
  url: string;
  /** The sandbox engine it drives, once workers know it; null until then. */
  engineId: string | null;
  startedAt: string;
  /** Its sandboxes' disk limit: the engine's own (hard), sampled by the worker (watched), or none (off). */
  diskLimit?: "hard" | "watched" | "off";
  /** Host names of its egress policy that do not resolve now (their rules are missing; retried). */
  egressUnresolved?: string[];
}

const indexKey = (prefix: string) => `${prefix}:worker-endpoints`;
const endpointKey = (prefix: string, workerId: string) => `${prefix}:worker-endpoint:${workerId}`;

/** Advertises (or renews) a worker for `ttlMs`; expired entries of others are swept on the way. */
export const advertiseWorker = async (
  redis: Redis,
  prefix: string,
  endpoint: WorkerEndpoint,
  ttlMs: number,
): Promise<void> => {
  const now = Date.now();
  await redis
    .multi()
    .set(endpointKey(prefix, endpoint.workerId), JSON.stringify(endpoint), "PX", ttlMs)
    .zadd(indexKey(prefix), now + ttlMs, endpoint.workerId)
    .zremrangebyscore(indexKey(prefix), "-inf", now)
    .exec();
};

/** A worker stopping says so at once, rather than being picked until its entry expires. */
export const withdrawWorker = async (redis: Redis, prefix: string, workerId: string): Promise<void> => {
  await redis.multi().del(endpointKey(prefix, workerId)).zrem(indexKey(prefix), workerId).exec();
};

/** The workers whose entries have not expired. */
export const liveWorkers = async (redis: Pick<Redis, "zrangebyscore" | "mget">, prefix: string) => {
  const ids = await redis.zrangebyscore(indexKey(prefix), Date.now(), "+inf");
  if (ids.length === 0) return [];
  const values = await redis.mget(ids.map((id) => endpointKey(prefix, id)));
  return values.flatMap((v): WorkerEndpoint[] => {
    if (!v) return [];
    try {
      return [JSON.parse(v) as WorkerEndpoint];
    } catch {
      return [];
    }
  });
};
