import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerConfirmationPolicy } from "./confirmation-policy.ts";
import { registerDeleteConversation } from "./delete.ts";
import { registerInterrupt } from "./interrupt.ts";
import { registerPause } from "./pause.ts";
import { registerRespondToConfirmation } from "./respond-to-confirmation.ts";
import { registerRun } from "./run.ts";
import { registerSendMessage } from "./send-message.ts";

/**
 * Follow-ups on a conversation (OpenHands shapes): POST /api/v1/conversation/{id}/events,
 * POST /api/v1/conversation/{id}/pause, /interrupt and /run, DELETE /api/v1/app-conversations/{id},
 * and confirmation mode's answer (/events/respond_to_confirmation) and policy (/confirmation-policy).
 */
export const followUpRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerSendMessage(router, deps);
  registerPause(router, deps);
  registerInterrupt(router, deps);
  registerRun(router, deps);
  registerDeleteConversation(router, deps);
  registerRespondToConfirmation(router, deps);
  registerConfirmationPolicy(router, deps);
  return router;
};
