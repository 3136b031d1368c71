import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerEventStream } from "./events-sse.ts";
import { registerStartTaskStream } from "./start-task-sse.ts";

/** Live streams: a conversation's events and a start task's stages, as Server-Sent Events. */
export const streamRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerEventStream(router, deps);
  registerStartTaskStream(router, deps);
  return router;
};
