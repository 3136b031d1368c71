import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerBatchGetConversations } from "./batch-get.ts";
import { registerSearchConversations } from "./search.ts";
import { registerStartConversation } from "./start.ts";
import { registerBatchGetStartTasks } from "./start-tasks-batch-get.ts";
import { registerSearchStartTasks } from "./start-tasks-search.ts";

/** /api/v1/app-conversations: start, batch reads, listings; and the start tasks beneath it. */
export const appConversationRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerStartConversation(router, deps);
  registerBatchGetConversations(router, deps);
  // Static paths, so no /app-conversations/{id} route (the follow-up router's DELETE) can capture them.
  registerSearchConversations(router, deps);
  registerBatchGetStartTasks(router, deps);
  registerSearchStartTasks(router, deps);
  return router;
};
