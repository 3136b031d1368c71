import { createRoute, z } from "@hono/zod-openapi";
import { listGitProviders } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toGitProviderRecord } from "./records.ts";
import { gitProviderRecordSchema } from "./schemas.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/git/providers",
  tags: ["Git providers"],
  summary: "The caller's git accounts (never their tokens)",
  responses: {
    200: {
      description: "The accounts",
      content: { "application/json": { schema: z.array(gitProviderRecordSchema) } },
    },
    ...errorResponses,
  },
});

export const registerListGitProviders = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const accounts = await listGitProviders(deps, c.get("principal").userId);
    return c.json(accounts.map(toGitProviderRecord), 200);
  });
