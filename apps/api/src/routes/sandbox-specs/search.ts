import { createRoute, z } from "@hono/zod-openapi";
import { sandboxSpecRecordSchema } from "@tern/core";
import { decodePageCursor, encodePageCursor, listSandboxSpecs, offeredImages, sandboxSpecImages } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, toSandboxSpecRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/sandbox-specs/search",
  tags: ["Sandboxes"],
  summary: "The sandbox images this deployment offers",
  description:
    "SANDBOX_IMAGE first (the default spec), then those of SANDBOX_IMAGES, then those admins named " +
    "(POST /api/v1/sandbox-specs), each with its runtime images (tern extension).",
  request: { query: z.object(pageQuery) },
  responses: {
    200: {
      description: "A page",
      content: { "application/json": { schema: pageSchema(sandboxSpecRecordSchema, "SandboxSpecInfoPage") } },
    },
    ...errorResponses,
  },
});

// The list is short and changes rarely (the configuration's, then admins'): a page's position is an index into it.
const position = z.object({ i: z.number().int().nonnegative() });
const SCOPE = "sandbox-specs";

export const registerSearchSandboxSpecs = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { limit, page_id } = c.req.valid("query");
    const from = page_id ? decodePageCursor(deps.config.cursorSecret, SCOPE, page_id, position).i : 0;
    const specs = await listSandboxSpecs(deps, offeredImages(deps.config));
    const page = specs.slice(from, from + limit);
    const next =
      from + limit < specs.length ? encodePageCursor(deps.config.cursorSecret, SCOPE, { i: from + limit }) : null;
    const images = await sandboxSpecImages(
      deps,
      page.map((s) => s.id),
    );
    return c.json({ items: page.map((s) => toSandboxSpecRecord(s, images.get(s.id))), next_page_id: next }, 200);
  });
