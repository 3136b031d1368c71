import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerCreateSecret } from "./create.ts";
import { registerDeleteSecret } from "./delete.ts";
import { registerListSecrets } from "./list.ts";
import { registerUpdateSecret } from "./update.ts";

/** /api/v1/secrets: the caller's secrets (values write-only). */
export const secretRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerListSecrets(router, deps);
  registerCreateSecret(router, deps);
  registerUpdateSecret(router, deps);
  registerDeleteSecret(router, deps);
  return router;
};
