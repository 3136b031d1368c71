import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerCreateKey } from "./create.ts";
import { registerListKeys } from "./list.ts";
import { registerRevokeKey } from "./revoke.ts";

/** /api/keys: create, list, revoke. */
export const keyRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerCreateKey(router, deps);
  registerListKeys(router, deps);
  registerRevokeKey(router, deps);
  return router;
};
