import { hostname } from "node:os";
import { ConfigError, createLogger } from "@tern/core";
import { createDb, migrateToLatest, sandboxesRepository } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import { createDockerDriver, createSandboxPool, ensureSandboxNetwork } from "@tern/sandbox";
import Docker from "dockerode";
import { loadWorkerConfig } from "./config.ts";
import type { WorkerDeps } from "./deps.ts";
import { markWorkerAlive, workerAliveKey } from "./liveness.ts";
import { emptyWorkspaceWarmUp } from "./pipeline/prepare-repository.ts";
import { runJanitor } from "./processors/janitor.ts";
import { createShutdownManager } from "./shutdown.ts";
import { startWorkers } from "./workers.ts";

const dockerFromHost = (host: string | undefined): Docker => {
  if (!host) return new Docker();
  if (host.startsWith("unix://")) return new Docker({ socketPath: host.slice("unix://".length) });
  const u = new URL(host.replace(/^tcp:/, "http:"));
  return new Docker({ host: u.hostname, port: Number(u.port || 2375) });
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ALIVE_TTL_MS = 30_000;

const main = async () => {
  const config = loadWorkerConfig(process.env);
  const workerId = config.WORKER_ID ?? `${hostname()}-${process.pid}`;
  const logger = createLogger("worker", config.LOG_LEVEL).child({ worker_id: workerId });
  const shutdown = createShutdownManager(logger);

  const { db, close: closeDb } = createDb(config.DATABASE_URL, {
    onError: (err) => logger.warn({ err }, "idle postgres client failed"),
  });
  shutdown.register("postgres", closeDb);
  await migrateToLatest(db);

  const redis = createRedis(config.REDIS_URL, "worker");
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
  shutdown.register("redis", async () => redis.disconnect());
  await redis.ping();
  const queues = createQueues(redis, config.REDIS_PREFIX);
  shutdown.register("queues", queues.close);

  const docker = dockerFromHost(config.DOCKER_HOST);
  await docker.ping();
  const network = await ensureSandboxNetwork(docker, config.SANDBOX_NETWORK);
  const sandboxes = createDockerDriver(docker);

  // Proves this process alive to every janitor (warm containers of a live worker are left alone).
  await markWorkerAlive(redis, config.REDIS_PREFIX, workerId, ALIVE_TTL_MS);
  const alive = setInterval(() => {
    markWorkerAlive(redis, config.REDIS_PREFIX, workerId, ALIVE_TTL_MS).catch(() => undefined);
  }, ALIVE_TTL_MS / 3);
  shutdown.register("liveness", async () => {
    clearInterval(alive);
    await redis.del(workerAliveKey(config.REDIS_PREFIX, workerId));
  });

  const pool =
    config.SANDBOX_POOL_SIZE > 0
      ? createSandboxPool(sandboxes, {
          size: config.SANDBOX_POOL_SIZE,
          namespace: config.REDIS_PREFIX,
          ownerId: workerId,
          spec: {
            image: config.SANDBOX_IMAGE,
            limits: { memoryMb: config.SANDBOX_MEMORY_MB, cpus: config.SANDBOX_CPUS, pids: config.SANDBOX_PIDS_LIMIT },
            network: config.SANDBOX_NETWORK,
          },
          prepare: emptyWorkspaceWarmUp(),
          // Docker cannot relabel a running container: the sandboxes row says whose it is now.
          onClaim: async (info, owner) => {
            await sandboxesRepository(db).upsert({
              id: owner.sandboxId,
              containerName: info.name,
              image: config.SANDBOX_IMAGE,
              startTaskId: owner.taskId,
            });
          },
          logger,
        })
      : null;
  if (pool) {
    await pool.start();
    shutdown.register("pool", () => pool.stop());
  }

  const deps: WorkerDeps = { config, db, redis, queues, sandboxes, pool, logger };
  const workers = startWorkers(deps);
  shutdown.register("workers", async () => {
    // Stop taking jobs and let the running ones finish; past the grace they are handed back
    // (their locks lapse and another worker takes them as stalled jobs).
    const closing = Promise.all(workers.map((w) => w.close()));
    const finished = await Promise.race([
      closing.then(() => true),
      sleep(config.WORKER_SHUTDOWN_GRACE_MS).then(() => false),
    ]);
    if (!finished) {
      logger.warn("jobs still running after the grace period; handing them back");
      await Promise.all(workers.map((w) => w.close(true)));
    }
  });

  await queues.janitor.upsertJobScheduler(
    "janitor",
    { every: config.JANITOR_INTERVAL_MS },
    { name: "sweep", data: {}, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
  // Once at start too: whatever a crash left behind goes now, not one interval later.
  runJanitor(deps)
    .then((r) => logger.info({ ...r }, "janitor ran at start"))
    .catch((err) => logger.warn({ err: err instanceof Error ? err.message : String(err) }, "janitor at start failed"));

  logger.info(
    {
      concurrency: config.WORKER_CONCURRENCY,
      network: network.name,
      gateway: network.gateway,
      pool: config.SANDBOX_POOL_SIZE,
    },
    "worker ready",
  );

  const stop = (signal: string) => {
    void shutdown.run(signal).then(() => process.exit(0));
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
};

main().catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(78);
  }
  process.stderr.write(`worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
