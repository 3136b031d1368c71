import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerCountEvents } from "./count.ts";
import { registerSearchEvents } from "./search.ts";

/** /api/v1/conversation/{conversation_id}/events: search and count. */
export const eventRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerSearchEvents(router, deps);
  registerCountEvents(router, deps);
  return router;
};
