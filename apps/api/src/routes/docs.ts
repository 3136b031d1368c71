import { swaggerUI } from "@hono/swagger-ui";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "@hono/zod-openapi";
import type { AuthEnv } from "../middleware/auth.ts";
import { errorSchema } from "./records.ts";

/**
 * `/openapi.json` (OpenAPI 3.1, generated from the same zod schemas that validate requests, so it
 * lists every route registered through OpenAPIHono, the follow-up router's included) and `/docs`.
 */
export const registerDocs = (app: OpenAPIHono<AuthEnv>, publicUrl: string) => {
  const registry = app.openAPIRegistry;
  registry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "An API key: `Authorization: Bearer <key>`",
  });
  registry.registerComponent("securitySchemes", "accessToken", {
    type: "apiKey",
    in: "header",
    name: "X-Access-Token",
  });
  registry.registerComponent("securitySchemes", "sessionApiKey", {
    type: "apiKey",
    in: "header",
    name: "X-Session-API-Key",
    description: "A conversation's session_api_key: reads that conversation and its events only",
  });
  const plain = (path: string, summary: string, schema: z.ZodType) =>
    registry.registerPath({
      method: "get",
      path,
      tags: ["Service"],
      summary,
      security: [],
      responses: {
        200: { description: "OK", content: { "application/json": { schema } } },
        503: { description: "Not ready", content: { "application/json": { schema: errorSchema } } },
      },
    });
  plain("/health", "Liveness", z.object({ status: z.literal("ok") }));
  plain(
    "/ready",
    "Readiness: Postgres and Redis answer",
    z.object({ status: z.literal("ok"), checks: z.record(z.string(), z.string()) }),
  );

  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: {
      title: "tern: conversation agent service",
      version: "1.0.0",
      description: "The OpenHands Cloud V1 conversation API: API keys, conversations, start tasks and events.",
    },
    servers: [{ url: publicUrl }],
    security: [{ bearerAuth: [] }, { accessToken: [] }],
  });
  app.get("/docs", swaggerUI({ url: "/openapi.json", title: "tern API" }));
};
