import { OpenAPIHono } from "@hono/zod-openapi";
import { AppError } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import type { ApiDeps } from "./deps.ts";
import { type AuthEnv, authenticate } from "./middleware/auth.ts";
import { errorResponse } from "./middleware/errors.ts";
import { createKeyUsage } from "./middleware/key-usage.ts";
import { notFoundOrMethodNotAllowed } from "./middleware/not-found.ts";
import { validationHook } from "./middleware/validation.ts";
import { ADMIN_QUEUES_PATH, adminQueueRoutes } from "./routes/admin/queues.ts";
import { appConversationRoutes } from "./routes/app-conversations/index.ts";
import { registerDocs } from "./routes/docs.ts";
import { eventRoutes } from "./routes/events/index.ts";
import { followUpRoutes } from "./routes/follow-ups/index.ts";
import { healthRoutes } from "./routes/health.ts";
import { keyRoutes } from "./routes/keys/index.ts";

export const MAX_BODY_BYTES = 1024 * 1024;

/** Builds the HTTP application from its dependencies; main.ts and the tests both call it. */
export const createApp = (deps: ApiDeps) => {
  const keyUsage = deps.keyUsage ?? createKeyUsage(apiKeysRepository(deps.db), deps.logger);
  const app = new OpenAPIHono<AuthEnv>({ defaultHook: validationHook });
  app.use(requestId());
  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new AppError("payload_too_large", "Request body is larger than 1 MiB");
      },
    }),
  );
  app.route("/", healthRoutes(deps));
  registerDocs(app, deps.config.publicUrl);

  // Everything under /api needs a key; handlers read the caller with c.get("principal").
  app.use("/api/*", authenticate(deps, keyUsage));
  app.route("/", keyRoutes(deps));
  app.route("/", appConversationRoutes(deps));
  app.route("/", eventRoutes(deps));
  app.route("/", followUpRoutes(deps));
  app.route(ADMIN_QUEUES_PATH, adminQueueRoutes(deps, keyUsage));

  app.notFound(notFoundOrMethodNotAllowed(() => app.routes));
  app.onError((err, c) => errorResponse(err, c, deps.logger));
  return app;
};
