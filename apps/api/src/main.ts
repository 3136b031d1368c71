import { serve } from "@hono/node-server";
import { runService, type ServiceContext, sealSessionApiKey, secretBoxFromConfig, startTracing } from "@tern/core";
import { apiKeysRepository, assertSchemaCurrent, conversationsRepository, createChangeFeed, createDb } from "@tern/db";
import { createQueueEvents, createQueues, createRedis, QueueName } from "@tern/queue";
import { resolveCursorSecret, resolveInternalToken } from "@tern/services";
import { createApp } from "./app.ts";
import { type ApiConfig, loadApiConfig } from "./config.ts";
import { createKeyCache } from "./middleware/key-cache.ts";
import { createKeyUsage } from "./middleware/key-usage.ts";
import { createStreamHub } from "./routes/streams/event-pump.ts";
import { createSocketServer } from "./routes/streams/socket-frames.ts";
import { startWorkerPresence } from "./worker-presence.ts";

const REDIS_START_WAIT_MS = 5_000;

const redisReady = (redis: ReturnType<typeof createRedis>, ms: number): Promise<void> =>
  redis.status === "ready"
    ? Promise.resolve()
    : new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          redis.off("ready", done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        redis.once("ready", done);
      });

const start = async ({ config, logger, shutdown }: ServiceContext<ApiConfig>) => {
  const tracing = await startTracing("tern-api", { endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  if (tracing) shutdown.register("tracing", tracing.shutdown);
  const { db, close: closeDb } = createDb(config.DATABASE_URL, {
    onError: (err) => logger.warn({ err }, "idle postgres client failed"),
  });
  shutdown.register("postgres", closeDb);
  // Migrations run once per deploy, before the processes (pnpm db:migrate); a schema behind refuses.
  await assertSchemaCurrent(db);
  const redis = createRedis(config.REDIS_URL, "producer");
  redis.on("error", (err) => logger.warn({ err }, "redis error"));
  shutdown.register("redis", () => redis.disconnect());
  const queues = createQueues(redis, config.REDIS_PREFIX);
  shutdown.register("queues", queues.close);
  // Start serving once Redis is connected, so a fresh API is ready at once; without Redis it
  // serves anyway after a short wait (starts answer 503, /ready says why, until Redis is back).
  await redisReady(redis, REDIS_START_WAIT_MS);
  const publicUrl = (config.PUBLIC_URL ?? `http://localhost:${config.PORT}`).replace(/\/$/, "");
  // Without a configured secret, cursors are signed with a random one generated once and kept in
  // Postgres: shared by every API replica of the deployment, and guessable from nothing.
  const cursorSecret = await resolveCursorSecret(db, config.CURSOR_SECRET);
  const secretBox = secretBoxFromConfig(config);
  // Session keys made before migration 0090 are still in plaintext: seal them before serving.
  const sealedKeys = await conversationsRepository(db).sealPlaintextSessionKeys(
    (id, key) => sealSessionApiKey(secretBox, id, key).sealed,
  );
  if (sealedKeys > 0) logger.info({ sealed: sealedKeys }, "sealed session keys stored in plaintext");

  // Sandbox commands are answered once their job completed: the sandbox queue's events say when.
  const sandboxEvents = createQueueEvents(config.REDIS_URL, config.REDIS_PREFIX, QueueName.Sandbox, (err) =>
    logger.warn({ err }, "sandbox queue events failed"),
  );
  shutdown.register("sandbox queue events", () => sandboxEvents.close());
  const workerAccess = {
    prefix: config.REDIS_PREFIX,
    token: await resolveInternalToken(db, config.WORKER_INTERNAL_TOKEN),
  };

  // One LISTEN connection for every live stream of this process (migration 0080's notifications).
  const changes = createChangeFeed(config.DATABASE_URL, {
    onError: (err) => logger.warn({ err }, "change feed connection lost; reconnecting"),
  });
  shutdown.register("change feed", () => changes.close());
  const streams = createStreamHub(db, changes);

  const keyUsage = createKeyUsage(apiKeysRepository(db), logger);
  shutdown.register("key usage", () => keyUsage.stop());
  // Keys resolved without Postgres; revocations reach it (and every other replica) by pub/sub.
  const keyCache =
    config.API_KEY_CACHE_TTL_MS > 0
      ? createKeyCache({ redis, prefix: config.REDIS_PREFIX, ttlMs: config.API_KEY_CACHE_TTL_MS, logger })
      : undefined;
  if (keyCache) shutdown.register("key cache", keyCache.close);
  // Whether any worker is alive to take the starts (the worker directory): /ready, starts, metrics.
  const presence = startWorkerPresence({ db, redis, prefix: config.REDIS_PREFIX, logger });
  shutdown.register("worker presence", presence.stop);
  const app = createApp({
    workerDirectory: presence.workers,
    onStartWaiting: presence.lookNow,
    config: { ...config, publicUrl, cursorSecret },
    db,
    redis,
    queues,
    logger,
    secretBox,
    keyUsage,
    keyCache,
    sandboxEvents: sandboxEvents.events,
    workerAccess,
    sandboxCommandTimeoutMs: config.SANDBOX_COMMAND_TIMEOUT_MS,
    streams,
  });
  // The event sockets (/sockets/events/{id}) upgrade through @hono/node-server's own WebSocket support.
  const server = serve({
    fetch: app.fetch,
    port: config.PORT,
    hostname: config.HOST,
    websocket: { server: createSocketServer() },
  });
  // Closed first: stop accepting connections and let in-flight requests finish.
  shutdown.register("http server", () => new Promise<void>((resolve) => server.close(() => resolve())));
  // Before it (shutdown runs in reverse): live streams end cleanly, or the server would wait on them.
  shutdown.register("event streams", () => streams.closeAll());
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.PORT;
  logger.info({ port, url: publicUrl }, "api listening");
};

void runService({ name: "api", loadConfig: loadApiConfig, start });
