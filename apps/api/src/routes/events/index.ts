import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerBatchGetEvents } from "./batch-get.ts";
import { registerCountEvents } from "./count.ts";
import { registerSearchEvents } from "./search.ts";

/** /api/v1/conversation/{conversation_id}/events: search, count and batch get. */
export const eventRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerSearchEvents(router, deps);
  registerCountEvents(router, deps);
  registerBatchGetEvents(router, deps);
  return router;
};
