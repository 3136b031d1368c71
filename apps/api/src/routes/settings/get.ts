import { createRoute } from "@hono/zod-openapi";
import { settingsRecordSchema } from "@tern/core";
import { getSettings } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toSettingsRecord } from "./record.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/settings",
  tags: ["Settings"],
  summary: "The caller's LLM settings (the key only as llm_api_key_set)",
  responses: {
    200: { description: "The settings", content: { "application/json": { schema: settingsRecordSchema } } },
    ...errorResponses,
  },
});

export const registerGetSettings = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => c.json(toSettingsRecord(await getSettings(deps, c.get("principal").userId)), 200));
