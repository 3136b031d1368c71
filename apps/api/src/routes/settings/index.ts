import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerGetSettings } from "./get.ts";
import { registerUpdateSettings } from "./update.ts";

/** /api/v1/settings: the caller's LLM settings. */
export const settingsRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerGetSettings(router, deps);
  registerUpdateSettings(router, deps);
  return router;
};
