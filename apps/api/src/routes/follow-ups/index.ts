import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerDeleteConversation } from "./delete.ts";
import { registerInterrupt } from "./interrupt.ts";
import { registerPause } from "./pause.ts";
import { registerRun } from "./run.ts";
import { registerSendMessage } from "./send-message.ts";

/**
 * Follow-ups on a conversation (OpenHands shapes): POST /api/v1/conversation/{id}/events,
 * POST /api/v1/conversation/{id}/pause, /interrupt and /run, DELETE /api/v1/app-conversations/{id}.
 */
export const followUpRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerSendMessage(router, deps);
  registerPause(router, deps);
  registerInterrupt(router, deps);
  registerRun(router, deps);
  registerDeleteConversation(router, deps);
  return router;
};
