import { hostname } from "node:os";
import {
  healthMetrics,
  metrics,
  runService,
  type ServiceContext,
  secretBoxFromConfig,
  startPeriodicTask,
  startTracing,
} from "@tern/core";
import { assertSchemaCurrent, createDb, enginesRepository, sandboxesRepository } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import {
  ContainmentError,
  containmentConfigError,
  createSandboxDriver,
  createSandboxPool,
  SandboxLabel,
  sandboxDriverConfig,
  traceSandboxDriver,
} from "@tern/sandbox";
import { startRunInterrupts } from "./agent/run-interrupts.ts";
import { loadWorkerConfig, sandboxLimitsOf, type WorkerConfig } from "./config.ts";
import type { WorkerDeps } from "./deps.ts";
import { startWorkerHttp } from "./http/index.ts";
import { startJanitorSchedule } from "./janitor-schedule.ts";
import { ALIVE_TTL_MS, markWorkerAlive, workerAliveKey } from "./liveness.ts";
import { emptyWorkspaceWarmUp } from "./pipeline/prepare-repository.ts";
import { gitServicesOf } from "./pipeline/repository-spec.ts";
import { runJanitor } from "./processors/janitor.ts";
import { startWebhookOutboxSweep } from "./processors/webhooks.ts";
import { startDiskLimitWatch } from "./sandbox/disk-limit.ts";
import { snapshotGuardedDriver } from "./sandbox/snapshot-guard.ts";
import { startWarmUpkeep, WARM_TOUCH_EVERY_MS, warmPoolStore } from "./sandbox/warm-rows.ts";
import { emptyWorkspaceImage, forgetEmptyWorkspaceImage } from "./sandbox/workspace-image.ts";
import { startWorkers } from "./workers.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Names this process in logs, pool labels and the jobs it processes. */
const workerIdOf = (config: WorkerConfig): string => config.WORKER_ID ?? `${hostname()}-${process.pid}`;

const loadConfig = (env: Record<string, string | undefined>) => {
  const config = loadWorkerConfig(env);
  return { ...config, WORKER_ID: workerIdOf(config) };
};

const start = async ({ config, logger, shutdown }: ServiceContext<ReturnType<typeof loadConfig>>) => {
  const workerId = config.WORKER_ID;
  const tracing = await startTracing("tern-worker", { endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  if (tracing) shutdown.register("tracing", tracing.shutdown);
  const { db, close: closeDb } = createDb(config.DATABASE_URL, {
    onError: (err) => logger.warn({ err }, "idle postgres client failed"),
  });
  shutdown.register("postgres", closeDb);
  // Migrations run once per deploy, before the processes (pnpm db:migrate); a schema behind refuses.
  await assertSchemaCurrent(db);

  const redis = createRedis(config.REDIS_URL, "worker");
  redis.on("error", (err) => logger.warn({ err }, "redis error"));
  shutdown.register("redis", () => redis.disconnect());
  await redis.ping();
  const queues = createQueues(redis, config.REDIS_PREFIX);
  shutdown.register("queues", queues.close);

  // The git hosts are what sandboxes must reach through their egress rules (they clone from them).
  const engine = createSandboxDriver(sandboxDriverConfig(config, gitServicesOf(config)), { logger });
  // Traced, each engine call is a span of the stage that made it.
  const sandboxes = tracing ? traceSandboxDriver(engine) : engine;
  // A worker that cannot hold its sandboxes in (disk limit, runtime, egress rules) takes no work.
  const prepared = await sandboxes.prepare().catch((err: unknown) => {
    throw err instanceof ContainmentError ? containmentConfigError(err) : err;
  });
  shutdown.register("sandbox driver", async () => sandboxes.close?.());
  const containment = sandboxes.containmentState?.() ?? null;

  // Affinity: the engine this worker drives, when only its workers reach its sandboxes (Docker).
  const engineId = prepared.engineId;
  if (engineId) {
    // Postgres knows each engine's last sign of life: its sandboxes are lost only after
    // ENGINE_LOST_AFTER without one (their jobs wait for a worker of it until then).
    const engines = enginesRepository(db);
    await engines.beat(engineId);
    const beatEveryMs = Math.min(10_000, (config.ENGINE_LOST_AFTER * 1000) / 4);
    const beating = startPeriodicTask("engine heartbeat", () => engines.beat(engineId), {
      everyMs: beatEveryMs,
      firstAfterMs: beatEveryMs,
      logger,
    });
    shutdown.register("engine heartbeat", beating.stop);
  }

  // Proves this process alive to every janitor (warm containers of a live worker are left alone).
  await markWorkerAlive(redis, config.REDIS_PREFIX, workerId, ALIVE_TTL_MS);
  const alive = startPeriodicTask(
    "worker liveness mark",
    () => markWorkerAlive(redis, config.REDIS_PREFIX, workerId, ALIVE_TTL_MS),
    { everyMs: ALIVE_TTL_MS / 3, firstAfterMs: ALIVE_TTL_MS / 3, logger },
  );
  shutdown.register("liveness", async () => {
    await alive.stop();
    await redis.del(workerAliveKey(config.REDIS_PREFIX, workerId));
  });

  /** Set once the worker's deps exist (after the pool's start): what the pool's prepared image needs. */
  let workerDeps: WorkerDeps | null = null;
  // Made even with no pool: its start removes what a killed predecessor under this WORKER_ID left warm.
  const warmPool = createSandboxPool(sandboxes, {
    size: config.SANDBOX_POOL_SIZE,
    max: config.SANDBOX_POOL_MAX,
    parallelCreates: config.SANDBOX_POOL_PARALLEL_CREATES,
    namespace: config.REDIS_PREFIX,
    ownerId: workerId,
    spec: {
      image: config.SANDBOX_IMAGE,
      limits: sandboxLimitsOf(config),
      // Warm sandboxes say which engine they are on, as every sandbox does.
      ...(engineId ? { labels: { [SandboxLabel.Engine]: engineId } } : {}),
    },
    prepare: emptyWorkspaceWarmUp(),
    // Once the worker's empty-workspace image exists, a refill is a create alone (as a cold start).
    preparedImage: () => (workerDeps ? emptyWorkspaceImage(workerDeps) : null),
    onPreparedImageFailed: (image, err) => {
      if (workerDeps) forgetEmptyWorkspaceImage(workerDeps, image);
      logger.warn({ err, image }, "empty-workspace image unusable; the warm sandbox is made from the sandbox image");
    },
    // A sandbox's labels are fixed when it is made: the sandboxes row says whose it is now.
    onClaim: async (info, owner) => {
      // A row the API wrote already (POST /api/v1/sandboxes) takes the warm sandbox's name.
      if (await sandboxesRepository(db).adoptWarm(owner.sandboxId, info.name, engineId)) return;
      await sandboxesRepository(db).upsert({
        id: owner.sandboxId,
        name: info.name,
        image: config.SANDBOX_IMAGE,
        startTaskId: owner.taskId,
        engineId,
      });
    },
    isClaimed: async (info) => (await sandboxesRepository(db).findByName(info.name)) !== null,
    // Rows the API claims in a start's own transaction; their health renewed this often.
    store: warmPoolStore({
      db,
      ownerId: workerId,
      engineId,
      image: config.SANDBOX_IMAGE,
      llmModel: config.LLM_MODEL ?? null,
    }),
    checkEveryMs: WARM_TOUCH_EVERY_MS,
    logger,
  });
  await warmPool.start();
  shutdown.register("pool", () => warmPool.stop());
  const pool = config.SANDBOX_POOL_SIZE > 0 ? warmPool : null;

  const secretBox = secretBoxFromConfig(config);
  // The user's interrupts reach the runs this worker holds; past the shutdown grace, every wait stops.
  const runInterrupts = await startRunInterrupts({ redis, prefix: config.REDIS_PREFIX, logger });
  shutdown.register("run interrupts", runInterrupts.stop);
  const stopping = new AbortController();
  const deps: WorkerDeps = {
    config,
    db,
    redis,
    queues,
    sandboxes,
    engineId,
    pool,
    logger,
    secretBox,
    runInterrupts: runInterrupts.interrupts,
    stopping: stopping.signal,
  };
  workerDeps = deps;
  const workers = startWorkers(deps);
  // Registered after the workers, so it stops first: no new tries are enqueued while jobs finish.
  const webhookSweep = startWebhookOutboxSweep(deps);
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
      stopping.abort(new Error("the worker is shutting down"));
      await Promise.all(workers.map((w) => w.close(true)));
    }
  });

  shutdown.register("webhook outbox sweep", webhookSweep.stop);
  // Claimed starts' agent runs the API could not enqueue itself, and warm rows no owner checks.
  const warmUpkeep = startWarmUpkeep(deps);
  shutdown.register("warm upkeep", warmUpkeep.stop);

  // Where the engine cannot hold the disk limit, this worker does (see sandbox/disk-limit.ts).
  const diskWatch = startDiskLimitWatch(deps, {
    namespace: config.REDIS_PREFIX,
    writeMbps: config.SANDBOX_DISK_WRITE_MBPS,
  });
  if (diskWatch) shutdown.register("disk limit watch", diskWatch.stop);
  if (containment?.disk.mode === "watched") {
    logger.warn(
      { disk_mode: "watched", limit_mb: containment.disk.limitMb, storage: containment.disk.storage },
      "the Docker engine cannot hold the disk limit itself: this worker samples each sandbox's writes and pauses one past it",
    );
  } else if (containment?.disk.mode === "off") {
    logger.warn({ disk_mode: "off" }, "sandboxes have no disk limit (SANDBOX_DISK_ENFORCE=false)");
  }

  // After the workers, so its shutdown comes first: the API stops picking this worker before it stops.
  const refreshMetrics = async () => {
    const now = sandboxes.containmentState?.();
    if (now) {
      for (const mode of ["hard", "watched", "off"] as const) {
        healthMetrics.sandboxDiskLimitMode.set({ mode }, now.disk.mode === mode ? 1 : 0);
      }
      healthMetrics.sandboxDiskLimitBytes.set((now.disk.limitMb ?? 0) * 1024 * 1024);
      healthMetrics.egressUnresolvedNames.set(now.egress?.unresolved.length ?? 0);
      // One series, the mode in force (it is fixed for the worker's life).
      healthMetrics.sandboxRootMode.reset();
      healthMetrics.sandboxRootMode.set(
        { mode: now.root.mode, safety: now.root.safety ?? "none", forced: String(now.root.forced) },
        1,
      );
    }
    metrics.poolSize.set(warmPool.available());
    metrics.poolTarget.set(warmPool.target());
    for (const queue of queues.all) {
      const counts = await queue.getJobCounts("waiting", "active", "delayed", "failed", "prioritized");
      for (const [state, n] of Object.entries(counts)) metrics.queueDepth.set({ queue: queue.name, state }, n);
    }
  };
  // The agent-server operations wait, as the agent's runs do, for a snapshot still being committed.
  const agentSandboxes = snapshotGuardedDriver(sandboxes, db, { logger });
  await startWorkerHttp({ config, db, redis, sandboxes: agentSandboxes, engineId, logger, refreshMetrics }, shutdown);

  // The schedule is this process's own timer (see janitor-schedule.ts), one sweep at a time per
  // engine (each engine sweeps its own containers). The Redis-stored schedulers of earlier versions
  // would sweep besides it: they go.
  for (const q of new Set([queues.janitor, queues.forEngine(engineId).janitor])) {
    await q.removeJobScheduler("janitor").catch(() => undefined);
  }
  const janitor = startJanitorSchedule({
    redis,
    prefix: config.REDIS_PREFIX,
    engineId,
    workerId,
    intervalMs: config.JANITOR_INTERVAL_MS,
    logger,
    sweep: () => runJanitor(deps),
    onSwept: (report, ms) => {
      const acted = Object.values(report).some((list) => list.length > 0);
      if (acted) logger.info({ ...report, ms }, "janitor swept");
    },
  });
  shutdown.register("janitor", () => janitor.stop());
  // Once at start too (unless another worker's sweep is due anyway): whatever a crash left goes now.
  void janitor.tick();

  logger.info(
    {
      concurrency: config.WORKER_CONCURRENCY,
      ...prepared.summary,
      disk_mode: containment?.disk.mode ?? "off",
      host_address: prepared.hostAddress,
      pool: config.SANDBOX_POOL_SIZE,
      pool_max: config.SANDBOX_POOL_MAX ?? config.SANDBOX_POOL_SIZE,
    },
    "worker ready",
  );
};

void runService({ name: "worker", loadConfig, logBindings: (config) => ({ worker_id: config.WORKER_ID }), start });
