import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerBatchGetSandboxSpecs } from "./batch-get.ts";
import { registerCreateSandboxSpec } from "./create.ts";
import { registerDeleteSandboxSpec } from "./delete.ts";
import { registerSearchSandboxSpecs } from "./search.ts";

/** /api/v1/sandbox-specs (OpenHands' SandboxSpecInfo): the images of the configuration, and those admins name. */
export const sandboxSpecRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerSearchSandboxSpecs(router, deps);
  registerBatchGetSandboxSpecs(router, deps);
  registerCreateSandboxSpec(router, deps);
  registerDeleteSandboxSpec(router, deps);
  return router;
};
