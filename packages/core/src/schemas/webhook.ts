import { z } from "zod";
import { datetimeSchema, hexIdSchema } from "./formats.ts";

/** What a webhook may subscribe to. */
export const webhookEventTypes = ["start_task.status", "conversation.execution_status", "conversation.event"] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];

export const webhookDeliveryStatuses = ["pending", "delivered", "failed"] as const;
export type WebhookDeliveryStatus = (typeof webhookDeliveryStatuses)[number];

/** Standard Webhooks' secret form: `whsec_` and the base64 of 24 to 64 random bytes. */
const webhookSecretSchema = z
  .string()
  .regex(/^whsec_[A-Za-z0-9+/]{32,88}={0,2}$/, "must be whsec_ followed by the base64 of 24 to 64 bytes")
  .meta({ description: "Standard Webhooks signing secret (whsec_ + base64); generated when not given" });

export const createWebhookRequestSchema = z
  .object({
    url: z.string().max(2048).meta({ description: "https URL the deliveries are POSTed to" }),
    events: z
      .array(z.enum(webhookEventTypes))
      .min(1)
      .max(webhookEventTypes.length)
      .meta({ description: "What to deliver" }),
    secret: webhookSecretSchema.optional(),
  })
  .strict()
  .meta({ id: "CreateWebhookRequest" });

export type CreateWebhookRequest = z.infer<typeof createWebhookRequestSchema>;

/** A webhook as listed: never its secret. */
export const webhookRecordSchema = z
  .object({
    id: hexIdSchema,
    url: z.string(),
    events: z.array(z.enum(webhookEventTypes)),
    created_at: datetimeSchema,
  })
  .meta({ id: "Webhook" });

export type WebhookRecord = z.infer<typeof webhookRecordSchema>;

/** The answer to creating a webhook: the only time its secret is shown. */
export const createdWebhookSchema = webhookRecordSchema
  .extend({ secret: z.string().meta({ description: "The signing secret; shown this once only" }) })
  .meta({ id: "CreatedWebhook" });

export const deletedWebhookSchema = z
  .object({ id: hexIdSchema, deleted: z.literal(true) })
  .meta({ id: "DeletedWebhook" });

export const webhookDeliveryAttemptSchema = z
  .object({
    attempt: z.number().int(),
    started_at: datetimeSchema,
    duration_ms: z.number().int(),
    status_code: z.number().int().nullable().meta({ description: "The receiver's HTTP status; null when none came" }),
    error: z.string().nullable(),
  })
  .meta({ id: "WebhookDeliveryAttempt" });

export const webhookDeliverySchema = z
  .object({
    id: z.string().meta({ description: "The webhook-id header of every try of this delivery" }),
    type: z.enum(webhookEventTypes),
    status: z.enum(webhookDeliveryStatuses),
    data: z.record(z.string(), z.unknown()),
    created_at: datetimeSchema,
    delivered_at: datetimeSchema.nullable(),
    next_attempt_at: datetimeSchema.nullable().meta({ description: "When the next try is due (pending only)" }),
    attempts: z.array(webhookDeliveryAttemptSchema),
  })
  .meta({ id: "WebhookDelivery" });

export type WebhookDeliveryRecord = z.infer<typeof webhookDeliverySchema>;
