import { OpenAPIHono } from "@hono/zod-openapi";
import { AppError } from "@tern/core";
import { requestId } from "hono/request-id";
import type { ApiDeps } from "./deps.ts";
import { errorResponse } from "./middleware/errors.ts";
import { healthRoutes } from "./routes/health.ts";

/** Builds the HTTP application from its dependencies; main.ts and the tests both call it. */
export const createApp = (deps: ApiDeps) => {
  const app = new OpenAPIHono();
  app.use(requestId());
  app.route("/", healthRoutes(deps));
  app.notFound(() => {
    throw new AppError("not_found", "No such route");
  });
  app.onError((err, c) => errorResponse(err, c, deps.logger));
  return app;
};
