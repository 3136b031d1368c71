import { hostname } from "node:os";
import { type Logger, type ShutdownManager, startPeriodicTask } from "@tern/core";
import type { Database } from "@tern/db";
import { advertiseWorker, withdrawWorker } from "@tern/queue";
import type { ContainmentState, SandboxDriver } from "@tern/sandbox";
import { resolveInternalToken } from "@tern/services";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { WorkerConfig } from "../config.ts";
import { startInternalServer } from "./server.ts";

/** How long a worker's entry in the directory lives without a renewal (renewed every third of it). */
const ADVERTISE_TTL_MS = 15_000;

/** Where the API reaches this worker: WORKER_ADVERTISE_URL, else this host by name (or its address) and the port. */
export const advertisedUrl = (
  config: Pick<WorkerConfig, "WORKER_ADVERTISE_URL" | "WORKER_HTTP_HOST">,
  port: number,
) => {
  if (config.WORKER_ADVERTISE_URL) return config.WORKER_ADVERTISE_URL.replace(/\/$/, "");
  const anyAddress = ["0.0.0.0", "::", "[::]"].includes(config.WORKER_HTTP_HOST);
  const host = anyAddress ? hostname() : config.WORKER_HTTP_HOST;
  return `http://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`;
};

/** What the worker directory says of a worker's containment: its disk limit's mode and the egress names it lacks. */
const containmentFacts = (state: ContainmentState | null) =>
  state
    ? {
        diskLimit: state.disk.mode,
        ...(state.egress ? { egressUnresolved: state.egress.unresolved.map((u) => u.name) } : {}),
      }
    : {};

export interface WorkerHttpDeps {
  config: WorkerConfig & { WORKER_ID: string };
  db: Kysely<Database>;
  redis: Redis;
  sandboxes: Pick<SandboxDriver, "exec" | "inspect" | "archive" | "containmentState" | "openProcess">;
  /** The engine this worker drives (affinity): the API sends it the reads of that engine's sandboxes only. */
  engineId: string | null;
  logger: Logger;
  refreshMetrics?: () => Promise<void>;
}

/**
 * Starts the worker's HTTP server and advertises it in the worker directory (a key renewed as a
 * heartbeat), so the API can send it the reads that need a sandbox. Registers its own shutdown:
 * withdrawn from the directory and /ready failing first, then the server closed.
 */
export const startWorkerHttp = async (
  deps: WorkerHttpDeps,
  shutdown: Pick<ShutdownManager, "register">,
): Promise<{ url: string }> => {
  const { config, logger } = deps;
  const token = await resolveInternalToken(deps.db, config.WORKER_INTERNAL_TOKEN);
  const server = await startInternalServer(
    {
      db: deps.db,
      redis: deps.redis,
      sandboxes: deps.sandboxes,
      logger,
      workerId: config.WORKER_ID,
      token,
      refreshMetrics: deps.refreshMetrics,
      containment: () => deps.sandboxes.containmentState?.() ?? null,
      bashOutput: {
        perCommandChars: config.AGENT_BASH_OUTPUT_MAX_CHARS,
        perSandboxChars: config.AGENT_BASH_SANDBOX_OUTPUT_MAX_CHARS,
      },
    },
    { host: config.WORKER_HTTP_HOST, port: config.WORKER_HTTP_PORT },
  );
  const url = advertisedUrl(config, server.port);
  const startedAt = new Date().toISOString();
  // Renewed with the containment as it is now: the API's /ready shows each worker's.
  const endpoint = () => ({
    workerId: config.WORKER_ID,
    url,
    engineId: deps.engineId,
    startedAt,
    ...containmentFacts(deps.sandboxes.containmentState?.() ?? null),
  });
  await advertiseWorker(deps.redis, config.REDIS_PREFIX, endpoint(), ADVERTISE_TTL_MS);
  const renew = startPeriodicTask(
    "renewing the worker's directory entry",
    () => advertiseWorker(deps.redis, config.REDIS_PREFIX, endpoint(), ADVERTISE_TTL_MS),
    { everyMs: ADVERTISE_TTL_MS / 3, firstAfterMs: ADVERTISE_TTL_MS / 3, logger },
  );
  shutdown.register("http", async () => {
    await renew.stop();
    server.markStopping();
    await withdrawWorker(deps.redis, config.REDIS_PREFIX, config.WORKER_ID).catch(() => undefined);
    await server.close();
  });
  logger.info({ url, port: server.port }, "worker http listening");
  return { url };
};
