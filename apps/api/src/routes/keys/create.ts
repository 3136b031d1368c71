import { createRoute, z } from "@hono/zod-openapi";
import { AppError, generateApiKey, toHexId } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { parseIsoTimestamp } from "../../iso-timestamp.ts";
import { apiKeyRecordSchema, errorResponses, toApiKeyRecord } from "../records.ts";
import type { Router } from "../router.ts";

const body = z
  .object({
    name: z.string().trim().min(1).max(200).nullable().optional(),
    expires_at: z
      .string()
      .nullable()
      .optional()
      .openapi({ format: "date-time", description: "ISO 8601; without a zone it is UTC" }),
  })
  .openapi("CreateApiKeyRequest");

const created = apiKeyRecordSchema
  .omit({ last_used_at: true })
  .extend({ key: z.string().openapi({ description: "The key itself; shown this once only" }) })
  .openapi("CreatedApiKey");

const route = createRoute({
  method: "post",
  path: "/api/keys",
  tags: ["API keys"],
  summary: "Create an API key for the caller's user",
  request: { body: { required: false, content: { "application/json": { schema: body } } } },
  responses: {
    201: { description: "The new key, shown once", content: { "application/json": { schema: created } } },
    ...errorResponses,
  },
});

const DAY_MS = 86_400_000;

// The same shape as the schema failures of validationHook: message naming the field, and details.
const invalidExpiry = (message: string) =>
  new AppError("validation_failed", `expires_at: ${message}`, [{ field: "expires_at", in: "json", message }]);

export const registerCreateKey = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const principal = c.get("principal");
    const input = c.req.valid("json");
    let expiresAt: string | null = null;
    if (input.expires_at != null) {
      const parsed = parseIsoTimestamp(input.expires_at);
      if (!parsed) throw invalidExpiry("not an ISO 8601 timestamp");
      if (parsed.epochMs <= Date.now()) throw invalidExpiry("must be in the future");
      const maxDays = deps.config.API_KEY_MAX_LIFETIME_DAYS;
      if (parsed.epochMs > Date.now() + maxDays * DAY_MS) {
        throw invalidExpiry(`at most ${maxDays} days ahead`);
      }
      expiresAt = parsed.text;
    }
    const generated = generateApiKey();
    const key = await apiKeysRepository(deps.db).create({
      userId: principal.userId,
      name: input.name ?? null,
      prefix: generated.prefix,
      hash: generated.hash,
      expiresAt,
    });
    const record = toApiKeyRecord(key);
    return c.json(
      {
        id: toHexId(key.id),
        name: record.name,
        key: generated.key,
        prefix: record.prefix,
        created_at: record.created_at,
        expires_at: record.expires_at,
      },
      201,
    );
  });
