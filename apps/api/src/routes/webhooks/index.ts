import type { ApiDeps } from "../../deps.ts";
import { newRouter } from "../router.ts";
import { registerCreateWebhook } from "./create.ts";
import { registerDeleteWebhook } from "./delete.ts";
import { registerListWebhookDeliveries } from "./deliveries.ts";
import { registerListWebhooks } from "./list.ts";

/** /api/v1/webhooks: register, list, delete, and the deliveries of one. */
export const webhookRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerCreateWebhook(router, deps);
  registerListWebhooks(router, deps);
  registerDeleteWebhook(router, deps);
  registerListWebhookDeliveries(router, deps);
  return router;
};
