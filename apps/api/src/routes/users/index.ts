import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerCreateUser } from "./create.ts";
import { registerGetMe } from "./me.ts";

/** /api/v1/users: the caller's record, and new users (admins). */
export const userRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerGetMe(router, deps);
  registerCreateUser(router, deps);
  return router;
};
