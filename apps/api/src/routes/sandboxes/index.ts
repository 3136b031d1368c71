import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerBatchGetSandboxes } from "./batch-get.ts";
import { registerDeleteSandbox } from "./delete.ts";
import { registerPauseSandbox } from "./pause.ts";
import { registerResumeSandbox } from "./resume.ts";
import { registerSearchSandboxes } from "./search.ts";
import { registerSandboxSettingsSecrets } from "./settings-secrets.ts";
import { registerStartSandbox } from "./start.ts";

/**
 * /api/v1/sandboxes (OpenHands' SandboxInfo): listings from Postgres; pause, resume and removal as
 * jobs of the `sandbox` queue, answered once a worker carried them out (the API never talks to the
 * sandbox engine).
 */
export const sandboxRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  // The static path first, so /sandboxes/{id} routes never see "search" as an id.
  registerSearchSandboxes(router, deps);
  registerBatchGetSandboxes(router, deps);
  registerStartSandbox(router, deps);
  registerSandboxSettingsSecrets(router, deps);
  registerPauseSandbox(router, deps);
  registerResumeSandbox(router, deps);
  registerDeleteSandbox(router, deps);
  return router;
};
