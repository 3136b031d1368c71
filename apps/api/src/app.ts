import { OpenAPIHono } from "@hono/zod-openapi";
import { PayloadTooLargeError, renderMetrics } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import { tenantLimitsOf } from "./config.ts";
import type { ApiDeps } from "./deps.ts";
import { type AuthEnv, authenticate } from "./middleware/auth.ts";
import { errorResponse } from "./middleware/errors.ts";
import { createKeyUsage } from "./middleware/key-usage.ts";
import { notFoundOrMethodNotAllowed } from "./middleware/not-found.ts";
import { rejectNulCharacters } from "./middleware/nul-characters.ts";
import { createRateLimiter, rateLimit } from "./middleware/rate-limit.ts";
import { requestLog } from "./middleware/request-log.ts";
import { serverSpan } from "./middleware/server-span.ts";
import { validationHook } from "./middleware/validation.ts";
import { pageRoutes } from "./page/routes.ts";
import { ADMIN_QUEUES_PATH, adminQueueRoutes } from "./routes/admin/queues.ts";
import { AGENT_FILE_UPLOAD, AGENT_SERVER_MOUNT, agentServerRoutes } from "./routes/agent-server/index.ts";
import { appConversationRoutes } from "./routes/app-conversations/index.ts";
import { registerDocs } from "./routes/docs.ts";
import { eventRoutes } from "./routes/events/index.ts";
import { followUpRoutes } from "./routes/follow-ups/index.ts";
import { gitProviderRoutes } from "./routes/git/index.ts";
import { healthRoutes } from "./routes/health.ts";
import { keyRoutes } from "./routes/keys/index.ts";
import { pendingMessageRoutes } from "./routes/pending-messages/index.ts";
import { sandboxSpecRoutes } from "./routes/sandbox-specs/index.ts";
import { sandboxRoutes } from "./routes/sandboxes/index.ts";
import { secretRoutes } from "./routes/secrets/index.ts";
import { settingsRoutes } from "./routes/settings/index.ts";
import { registerEventSocket } from "./routes/streams/events-socket.ts";
import { streamRoutes } from "./routes/streams/index.ts";
import { MAX_BODY_BYTES } from "./routes/streams/socket-frames.ts";
import { userRoutes } from "./routes/users/index.ts";
import { webhookRoutes } from "./routes/webhooks/index.ts";

/** Builds the HTTP application from its dependencies; main.ts and the tests both call it. */
export const createApp = (given: ApiDeps) => {
  // The services enforce the tenancy limits of this API's configuration on every caller.
  const deps: ApiDeps = {
    ...given,
    limits: given.limits ?? tenantLimitsOf(given.config),
    warmSpec: given.warmSpec ?? given.config.SANDBOX_IMAGE,
    llmModels: given.llmModels ?? { LLM_PROVIDER: given.config.LLM_PROVIDER, LLM_MODELS: given.config.LLM_MODELS },
    ...(given.workersAlive || !given.workerDirectory
      ? {}
      : { workersAlive: async () => (await given.workerDirectory?.())?.length ?? 0 }),
  };
  const keyUsage = deps.keyUsage ?? createKeyUsage(apiKeysRepository(deps.db), deps.logger);
  const limiter =
    deps.rateLimiter === undefined
      ? createRateLimiter(deps.redis, deps.config.REDIS_PREFIX, deps.config)
      : deps.rateLimiter;
  const app = new OpenAPIHono<AuthEnv>({ defaultHook: validationHook });
  app.use(requestId());
  app.use(serverSpan());
  // Prometheus's scrape, beside /health: no key (keep it off the public network at the proxy).
  app.get("/metrics", async (c) => {
    const { body, contentType } = await renderMetrics();
    return c.body(body, 200, { "content-type": contentType });
  });
  app.use(requestLog(deps.logger, { mode: deps.config.ACCESS_LOG, slowMs: deps.config.ACCESS_LOG_SLOW_MS }));
  const limitBody = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new PayloadTooLargeError("Request body is larger than 1 MiB");
    },
  });
  // The agent server's file upload streams its body to the sandbox under its own cap
  // (AGENT_FILE_UPLOAD_MAX_BYTES, 413 past it); every other body is held to 1 MiB. A GET or HEAD
  // has none to hold (@hono/node-server gives them no body): asking for it would build the full
  // fetch Request (URL, headers, abort signal) of every read only to find that out.
  app.use((c, next) =>
    c.req.method === "GET" || c.req.method === "HEAD" || AGENT_FILE_UPLOAD.test(c.req.path)
      ? next()
      : limitBody(c, next),
  );
  app.route("/", healthRoutes(deps, keyUsage));
  registerDocs(app, deps.config.publicUrl);
  app.route("/", pageRoutes(deps));

  // Everything under /api needs a key; handlers read the caller with c.get("principal").
  // An /api request meets these in this order: the key, its rate, then the NUL check.
  for (const path of ["/api/*", "/sockets/*"]) {
    app.use(path, authenticate(deps, keyUsage));
    if (limiter) app.use(path, rateLimit(limiter));
  }
  app.use("/api/*", rejectNulCharacters());
  registerEventSocket(app, deps, limiter);
  for (const routes of [
    keyRoutes,
    appConversationRoutes,
    eventRoutes,
    streamRoutes,
    followUpRoutes,
    pendingMessageRoutes,
    sandboxRoutes,
    sandboxSpecRoutes,
    userRoutes,
    secretRoutes,
    settingsRoutes,
    webhookRoutes,
    gitProviderRoutes,
  ]) {
    app.route("/", routes(deps));
  }
  app.route(ADMIN_QUEUES_PATH, adminQueueRoutes(deps, keyUsage));
  // Each sandbox's agent-server API: its own key check (X-Session-API-Key), not `authenticate`.
  app.route(AGENT_SERVER_MOUNT, agentServerRoutes({ ...deps, keyUsage, rateLimiter: limiter }));

  app.notFound(notFoundOrMethodNotAllowed(() => app.routes));
  app.onError((err, c) => errorResponse(err, c, deps.logger));
  return app;
};
