import { toHexId, type WebhookDeliveryRecord, type WebhookRecord } from "@tern/core";
import type { Webhook, WebhookDelivery, WebhookDeliveryAttempt } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";

export const toWebhookRecord = (w: Webhook): WebhookRecord => ({
  id: toHexId(w.id),
  url: w.url,
  events: w.events,
  created_at: w.createdAt,
});

export const toWebhookDeliveryRecord = (
  d: WebhookDelivery & { attemptList: WebhookDeliveryAttempt[] },
): WebhookDeliveryRecord => ({
  id: webhookMessageId(d.id),
  type: d.eventType,
  status: d.status,
  data: d.data,
  created_at: d.createdAt,
  delivered_at: d.deliveredAt,
  next_attempt_at: d.status === "pending" ? d.nextAttemptAt : null,
  attempts: d.attemptList.map((a) => ({
    attempt: a.attempt,
    started_at: a.startedAt,
    duration_ms: a.durationMs,
    status_code: a.statusCode,
    error: a.error,
  })),
});

/** The webhook-id header of a delivery (the same on every try, so receivers can drop repeats). */
const webhookMessageId = (deliveryId: string): string => `msg_${toHexId(deliveryId)}`;

/** The services' webhook dependencies from the API's. */
export const webhookDepsOf = (deps: ApiDeps) => ({
  db: deps.db,
  secretBox: deps.secretBox,
  policy: { allowPrivate: deps.config.WEBHOOK_ALLOW_PRIVATE, allowHttp: deps.config.WEBHOOK_ALLOW_HTTP },
  maxWebhooksPerUser: deps.config.MAX_WEBHOOKS_PER_USER,
});
