import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerCreateGitProvider } from "./create.ts";
import { registerDeleteGitProvider } from "./delete.ts";
import { registerListGitProviders } from "./list.ts";

/** /api/v1/git/providers: each user's own git accounts. */
export const gitProviderRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerCreateGitProvider(router, deps);
  registerListGitProviders(router, deps);
  registerDeleteGitProvider(router, deps);
  return router;
};
