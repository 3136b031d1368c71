import { serve } from "@hono/node-server";
import { ConfigError, createLogger } from "@tern/core";
import { apiKeysRepository, createDb, migrateToLatest } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import { createApp } from "./app.ts";
import { loadApiConfig } from "./config.ts";
import { createKeyUsage } from "./middleware/key-usage.ts";

const main = async () => {
  const config = loadApiConfig(process.env);
  const logger = createLogger("api", config.LOG_LEVEL);
  const { db, close: closeDb } = createDb(config.DATABASE_URL, {
    onError: (err) => logger.warn({ err }, "idle postgres client failed"),
  });
  await migrateToLatest(db);
  const redis = createRedis(config.REDIS_URL, "producer");
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
  const queues = createQueues(redis, config.REDIS_PREFIX);
  const publicUrl = (config.PUBLIC_URL ?? `http://localhost:${config.PORT}`).replace(/\/$/, "");
  // Without a configured secret, cursors are signed with one derived from the database URL:
  // stable across API replicas sharing a database, and never sent to a client.
  const cursorSecret = config.CURSOR_SECRET ?? `tern-cursor:${config.DATABASE_URL}`;

  const keyUsage = createKeyUsage(apiKeysRepository(db), logger);
  const app = createApp({ config: { ...config, publicUrl, cursorSecret }, db, redis, queues, logger, keyUsage });
  const server = serve({ fetch: app.fetch, port: config.PORT, hostname: config.HOST }, (info) => {
    logger.info({ port: info.port, url: publicUrl }, "api listening");
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "api shutting down");
    // Stop accepting connections, let in-flight requests finish, then close clients.
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await keyUsage.stop();
    await queues.close().catch(() => undefined);
    redis.disconnect();
    await closeDb();
    logger.info("api stopped");
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
  process.stderr.write(`api failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
