import { createRoute, z } from "@hono/zod-openapi";
import { sandboxRecordSchema } from "@tern/core";
import { searchSandboxes } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, toSandboxRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/sandboxes/search",
  tags: ["Sandboxes"],
  summary: "The caller's sandboxes, newest first",
  description: "Every sandbox of the caller's start tasks, in any status (removed ones are MISSING).",
  request: { query: z.object(pageQuery) },
  responses: {
    200: {
      description: "A page",
      content: { "application/json": { schema: pageSchema(sandboxRecordSchema, "SandboxPage") } },
    },
    ...errorResponses,
  },
});

export const registerSearchSandboxes = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { limit, page_id } = c.req.valid("query");
    const page = await searchSandboxes(deps, c.get("principal"), { limit, pageId: page_id });
    const items = page.items.map((s) => toSandboxRecord(s, deps.secretBox, deps.config));
    return c.json({ items, next_page_id: page.next_page_id }, 200);
  });
