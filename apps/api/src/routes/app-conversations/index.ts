import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerBatchGetConversations } from "./batch-get.ts";
import { registerCountConversations } from "./count.ts";
import { registerWorkspaceResults } from "./diff.ts";
import { registerDownloadTrajectory } from "./download.ts";
import { registerReadFile } from "./file.ts";
import { registerListHooks } from "./hooks.ts";
import { registerReadOnlyKey } from "./read-only-key.ts";
import { registerSearchConversations } from "./search.ts";
import { registerAppSendMessage } from "./send-message.ts";
import { registerListSkills } from "./skills.ts";
import { registerStartConversation } from "./start.ts";
import { registerBatchGetStartTasks } from "./start-tasks-batch-get.ts";
import { registerSearchStartTasks } from "./start-tasks-search.ts";
import { registerStreamStart } from "./stream-start.ts";
import { registerUpdateConversation } from "./update.ts";

/** /api/v1/app-conversations: start, batch reads, listings; and the start tasks beneath it. */
export const appConversationRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerStartConversation(router, deps);
  registerStreamStart(router, deps);
  registerBatchGetConversations(router, deps);
  // Static paths, so no /app-conversations/{id} route (the follow-up router's DELETE) can capture them.
  registerSearchConversations(router, deps);
  registerCountConversations(router, deps);
  registerBatchGetStartTasks(router, deps);
  registerSearchStartTasks(router, deps);
  // What the conversation holds: its sandbox's files (read by a worker), skills, hooks, trajectory.
  registerReadFile(router, deps);
  registerListSkills(router, deps);
  registerListHooks(router, deps);
  registerDownloadTrajectory(router, deps);
  registerWorkspaceResults(router, deps);
  registerUpdateConversation(router, deps);
  registerAppSendMessage(router, deps);
  registerReadOnlyKey(router, deps);
  return router;
};
