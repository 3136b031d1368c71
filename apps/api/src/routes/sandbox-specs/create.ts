import { createRoute } from "@hono/zod-openapi";
import { sandboxSpecCreateSchema, sandboxSpecRecordSchema } from "@tern/core";
import { addSandboxSpec, offeredImages } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, toSandboxSpecRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/sandbox-specs",
  tags: ["Sandboxes"],
  summary: "Name a base image as a sandbox spec (admin keys only)",
  description:
    "tern extension. Any image on the engines (never pulled by tern): a start picks it with `sandbox_spec_id`. Its " +
    "first start on an engine builds its runtime image there (the image with tern's tools, the sandbox user and " +
    "the workspace added, nothing of the image run), once per image digest and tools version.",
  request: { body: { required: true, content: { "application/json": { schema: sandboxSpecCreateSchema } } } },
  responses: {
    200: { description: "The spec", content: { "application/json": { schema: sandboxSpecRecordSchema } } },
    ...errorResponses,
    403: errorResponse("The caller's key is not an admin key"),
  },
});

export const registerCreateSandboxSpec = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const spec = await addSandboxSpec(deps, c.get("principal"), c.req.valid("json").id, offeredImages(deps.config));
    return c.json(toSandboxSpecRecord(spec), 200);
  });
