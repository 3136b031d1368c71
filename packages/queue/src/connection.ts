import { QueueEvents } from "bullmq";
import { Redis, type RedisOptions } from "ioredis";
import type { QueueName } from "./catalog.ts";

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

const CLOSE_GRACE_MS = 1_000;

export interface QueueEventsHandle {
  events: QueueEvents;
  close: () => Promise<void>;
}

/**
 * The events of one queue (job completed, failed, ...), for a producer that waits for its jobs'
 * results. QueueEvents blocks on its connection, so it gets one of its own; `onError` hears its
 * failures (Redis unreachable), which would otherwise be unhandled.
 */
export const createQueueEvents = (
  url: string,
  prefix: string,
  queue: QueueName,
  onError: (err: Error) => void = () => undefined,
): QueueEventsHandle => {
  const connection = createRedis(url, "worker");
  connection.on("error", onError);
  const events = new QueueEvents(queue, { connection, prefix });
  events.on("error", onError);
  return {
    events,
    close: async () => {
      // The connection first: a blocking read (or a reconnect loop, Redis being down) would hold
      // the close open. While Redis was never reached, BullMQ's close waits for a connection that
      // will not come: it gets a moment, not the rest of the shutdown.
      connection.disconnect();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        events.close().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, CLOSE_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
    },
  };
};
