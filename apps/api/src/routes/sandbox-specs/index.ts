import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerBatchGetSandboxSpecs } from "./batch-get.ts";
import { registerSearchSandboxSpecs } from "./search.ts";

/** /api/v1/sandbox-specs (OpenHands' SandboxSpecInfo): the images of the configuration. */
export const sandboxSpecRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerSearchSandboxSpecs(router, deps);
  registerBatchGetSandboxSpecs(router, deps);
  return router;
};
