import { createRoute } from "@hono/zod-openapi";
import { sandboxSpecRecordSchema } from "@tern/core";
import { listSandboxSpecs, offeredImages, sandboxSpecImages } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { batchSchema, idQuery } from "../queries.ts";
import { errorResponses, toSandboxSpecRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/sandbox-specs",
  tags: ["Sandboxes"],
  summary: "Sandbox specs by id (the image), in the order asked; null where this deployment offers none",
  request: { query: idQuery },
  responses: {
    200: {
      description: "One entry per id asked",
      content: { "application/json": { schema: batchSchema(sandboxSpecRecordSchema) } },
    },
    ...errorResponses,
  },
});

export const registerBatchGetSandboxSpecs = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const specs = new Map((await listSandboxSpecs(deps, offeredImages(deps.config))).map((s) => [s.id, s]));
    const ids = c.req.valid("query").id;
    const images = await sandboxSpecImages(deps, ids);
    return c.json(
      ids.map((id) => {
        const spec = specs.get(id);
        return spec ? toSandboxSpecRecord(spec, images.get(id)) : null;
      }),
      200,
    );
  });
