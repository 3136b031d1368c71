import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "@hono/zod-openapi";
import type { AuthEnv } from "../middleware/auth.ts";
import { errorResponse } from "./records.ts";

/** The document's fixed parts: served at `/openapi.json`, and used by buildOpenApiDocument. */
export const openApiDocumentConfig = (publicUrl: string): Parameters<OpenAPIHono["getOpenAPI31Document"]>[0] => ({
  openapi: "3.1.0",
  info: {
    title: "tern: conversation agent service",
    version: "1.0.0",
    description: "The OpenHands Cloud V1 conversation API: API keys, conversations, start tasks and events.",
  },
  servers: [{ url: publicUrl }],
  security: [{ bearerAuth: [] }, { accessToken: [] }],
});

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
    description:
      'A key that is not an API key (README, "Keys"). On these routes: a conversation\'s `session_api_key` ' +
      "reads that conversation and its events, and may interrupt it and answer its confirmations; its " +
      "read-only key (POST …/read-only-key) reads them and does nothing else; a sandbox's own key " +
      "(POST /api/v1/sandboxes) reads the owner's secrets for that sandbox (…/settings/secrets). On the " +
      "agent server (`agent_server_url`), a conversation's key acts on its own conversation and its sandbox's " +
      "workspace (never another conversation, never a new one, never a secret), a sandbox's key on the whole " +
      "sandbox, and a read-only key on nothing.",
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
        503: errorResponse("Not ready"),
      },
    });
  plain("/health", "Liveness", z.object({ status: z.literal("ok") }));
  plain(
    "/ready",
    "Readiness: Postgres and Redis answer",
    z.object({ status: z.literal("ok"), checks: z.record(z.string(), z.string()) }),
  );

  app.doc31("/openapi.json", openApiDocumentConfig(publicUrl));
  // Swagger UI's assets come from the swagger-ui-dist package, not a CDN: the docs work offline.
  app.get("/docs", (c) => c.html(docsPage));
  app.get("/docs/assets/:file", async (c) => {
    const file = c.req.param("file");
    const type = docsAssets[file];
    if (!type) return c.notFound();
    const body = await readFile(join(swaggerUiDir, file));
    return c.body(body, 200, { "content-type": type, "cache-control": "public, max-age=86400" });
  });
};

const swaggerUiDir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
const docsAssets: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
};
const docsPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>tern API</title><link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui" });</script>
</body>
</html>`;
