import { createRoute } from "@hono/zod-openapi";
import { settingsRecordSchema, settingsRequestSchema } from "@tern/core";
import { updateSettings } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toSettingsRecord } from "./record.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/settings",
  tags: ["Settings"],
  summary: "Change the caller's LLM settings: fields absent are kept, null clears one; llm_api_key is write-only",
  request: { body: { required: true, content: { "application/json": { schema: settingsRequestSchema } } } },
  responses: {
    200: {
      description: "The settings after the change",
      content: { "application/json": { schema: settingsRecordSchema } },
    },
    ...errorResponses,
  },
});

export const registerUpdateSettings = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const settings = await updateSettings(
      {
        db: deps.db,
        secretBox: deps.secretBox,
        llmModels: deps.llmModels,
        userBaseUrls: deps.config.LLM_USER_BASE_URLS,
        mcpAddressPolicy: { allowPrivate: deps.config.MCP_ALLOW_PRIVATE, allowHttp: deps.config.MCP_ALLOW_HTTP },
        mcpMaxServers: deps.config.MCP_MAX_SERVERS,
        ...(deps.resolve ? { resolve: deps.resolve } : {}),
      },
      c.get("principal").userId,
      c.req.valid("json"),
    );
    return c.json(toSettingsRecord(settings), 200);
  });
