import { timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type ErrorCode, httpStatusOf, isDomainError, type Logger, renderMetrics } from "@tern/core";
import type { Database } from "@tern/db";
import type { ContainmentState, SandboxDriver } from "@tern/sandbox";
import { Hono } from "hono";
import type { Redis } from "ioredis";
import { type Kysely, sql } from "kysely";
import { serveWorkerApi } from "./contract.ts";

/**
 * The worker's own HTTP server. For orchestrators: `/health` (the process answers) and `/ready`
 * (it reaches Postgres and Redis, and is not stopping). For the API, under `/internal/`, behind
 * the deployment's internal token: the operations of the workers' internal API (@tern/core's
 * worker-api.ts, served by ./contract.ts), since the API never talks to the sandbox engine itself
 * (see @tern/services' worker-access.ts). Each is served here, from the engine this worker drives.
 */
export interface InternalServerDeps {
  db: Kysely<Database>;
  redis: Pick<Redis, "ping">;
  sandboxes: Pick<SandboxDriver, "exec" | "inspect" | "archive" | "openProcess">;
  logger: Logger;
  /** This worker's id in the worker directory (the agent-server's bash commands are marked with it). */
  workerId?: string;
  /** The token the API sends (Authorization: Bearer). */
  token: string;
  /** Brings the gauges read at scrape time (queue depth, warm pool size) up to date before /metrics. */
  refreshMetrics?: () => Promise<void>;
  /** What holds the sandboxes in now (disk limit mode, egress names that do not resolve), for /ready. */
  containment?: () => ContainmentState | null;
  /** The agent-server bash output kept in Postgres (AGENT_BASH_*_OUTPUT_MAX_CHARS); defaults when absent. */
  bashOutput?: { perCommandChars: number; perSandboxChars: number };
}

const errorBody = (code: ErrorCode, message: string, details?: unknown) => ({
  error: { code, message, ...(details === undefined ? {} : { details }) },
  detail: message,
});

const sameToken = (given: string, expected: string): boolean => {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

const createInternalApp = (deps: InternalServerDeps, state: { stopping: boolean } = { stopping: false }) => {
  const app = new Hono();

  app.get("/health", (c) => c.json({ status: "ok" }));
  // Prometheus's scrape: unauthenticated, as orchestrators' probes are (this server is internal).
  app.get("/metrics", async (c) => {
    await deps.refreshMetrics?.().catch((err) => deps.logger.warn({ err }, "refreshing metrics failed"));
    const { body, contentType } = await renderMetrics();
    return c.body(body, 200, { "content-type": contentType });
  });
  app.get("/ready", async (c) => {
    const check = async (run: () => Promise<unknown>) =>
      run().then(
        () => "ok",
        () => "unreachable",
      );
    const checks = {
      postgres: await check(() => sql`select 1`.execute(deps.db)),
      redis: await check(() => deps.redis.ping()),
    };
    const ready = !state.stopping && Object.values(checks).every((v) => v === "ok");
    // Degraded parts of the containment are reported, not failed: the worker serves with the rest.
    const containment = deps.containment?.() ?? null;
    return c.json(
      { status: ready ? "ok" : state.stopping ? "stopping" : "unavailable", checks, containment },
      ready ? 200 : 503,
    );
  });

  app.use("/internal/*", async (c, next) => {
    const match = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "");
    if (!match?.[1] || !sameToken(match[1], deps.token)) {
      return c.json(errorBody("unauthorized", "The internal token is missing or wrong"), 401);
    }
    await next();
  });

  serveWorkerApi(app, { ...deps, workerId: deps.workerId ?? "unknown" });

  app.notFound((c) => c.json(errorBody("not_found", "Not found"), 404));
  app.onError((err, c) => {
    if (isDomainError(err)) return c.json(errorBody(err.code, err.message, err.details), httpStatusOf[err.code]);
    deps.logger.error({ err, path: c.req.path }, "internal request failed");
    return c.json(errorBody("internal", "Internal error"), 500);
  });
  return app;
};

export interface InternalServer {
  /** The port listened on (the configured one, or the one given for 0). */
  port: number;
  /** From now on /ready answers 503, so an orchestrator stops sending work; the server still answers. */
  markStopping: () => void;
  close: () => Promise<void>;
}

/** Starts the server on `host`:`port` (0: any free port). */
export const startInternalServer = async (
  deps: InternalServerDeps,
  listen: { host: string; port: number },
): Promise<InternalServer> => {
  const state = { stopping: false };
  const app = createInternalApp(deps, state);
  const server = serve({ fetch: app.fetch, port: listen.port, hostname: listen.host });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", () => resolve());
    server.once("error", reject);
  });
  return {
    port: (server.address() as AddressInfo).port,
    markStopping: () => {
      state.stopping = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive connections of the API would hold the close open.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
};
