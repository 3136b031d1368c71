import { createRoute } from "@hono/zod-openapi";
import { setGitProvider } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toGitProviderRecord } from "./records.ts";
import { createGitProviderSchema, gitProviderRecordSchema } from "./schemas.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/git/providers",
  tags: ["Git providers"],
  summary: "Set the caller's token for a git provider (replaces the one it had for that provider)",
  request: { body: { required: true, content: { "application/json": { schema: createGitProviderSchema } } } },
  responses: {
    201: {
      description: "The account, without its token",
      content: { "application/json": { schema: gitProviderRecordSchema } },
    },
    ...errorResponses,
  },
});

export const registerCreateGitProvider = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const input = c.req.valid("json");
    const account = await setGitProvider(deps, c.get("principal").userId, input);
    return c.json(toGitProviderRecord(account), 201);
  });
