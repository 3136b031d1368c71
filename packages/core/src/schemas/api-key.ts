import { z } from "zod";
import { datetimeSchema, hexIdSchema } from "./formats.ts";

export const createApiKeyRequestSchema = z
  .object({
    name: z.string().trim().min(1).max(200).nullable().optional(),
    expires_at: z
      .string()
      .nullable()
      .optional()
      .meta({ format: "date-time", description: "ISO 8601; without a zone it is UTC" }),
  })
  .meta({ id: "CreateApiKeyRequest" });

export type CreateApiKeyRequest = z.infer<typeof createApiKeyRequestSchema>;

/** A key as listed: never its secret. */
export const apiKeyRecordSchema = z
  .object({
    id: hexIdSchema,
    name: z.string().nullable(),
    prefix: z.string().meta({ description: "The first characters of the key, to tell keys apart" }),
    created_at: datetimeSchema,
    expires_at: datetimeSchema.nullable(),
    last_used_at: datetimeSchema.nullable(),
  })
  .meta({ id: "ApiKey" });

export type ApiKeyRecord = z.infer<typeof apiKeyRecordSchema>;

/** The answer to creating a key: the only time the key itself is shown. */
export const createdApiKeySchema = apiKeyRecordSchema
  .omit({ last_used_at: true })
  .extend({ key: z.string().meta({ description: "The key itself; shown this once only" }) })
  .meta({ id: "CreatedApiKey" });

export type CreatedApiKey = z.infer<typeof createdApiKeySchema>;

export const revokedApiKeySchema = z
  .object({ id: hexIdSchema, revoked: z.literal(true) })
  .meta({ id: "RevokedApiKey" });

export type RevokedApiKey = z.infer<typeof revokedApiKeySchema>;
