import { ConfigError, createLogger } from "@tern/core";
import { createDb, migrateToLatest } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import Docker from "dockerode";
import { loadWorkerConfig } from "./config.ts";

const dockerFromHost = (host: string | undefined): Docker => {
  if (!host) return new Docker();
  if (host.startsWith("unix://")) return new Docker({ socketPath: host.slice("unix://".length) });
  const u = new URL(host.replace(/^tcp:/, "http:"));
  return new Docker({ host: u.hostname, port: Number(u.port || 2375) });
};

const main = async () => {
  const config = loadWorkerConfig(process.env);
  const logger = createLogger("worker", config.LOG_LEVEL);
  const { db, close: closeDb } = createDb(config.DATABASE_URL, {
    onError: (err) => logger.warn({ err }, "idle postgres client failed"),
  });
  await migrateToLatest(db);
  const redis = createRedis(config.REDIS_URL, "worker");
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
  const queues = createQueues(redis, config.REDIS_PREFIX);
  const docker = dockerFromHost(config.DOCKER_HOST);
  await docker.ping();
  await redis.ping();

  logger.info({ concurrency: config.WORKER_CONCURRENCY }, "worker ready");

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "worker shutting down");
    await queues.close().catch(() => undefined);
    redis.disconnect();
    await closeDb();
    logger.info("worker stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
};

main().catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(78);
  }
  process.stderr.write(`worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
