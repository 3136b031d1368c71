import { z } from "@hono/zod-openapi";
import {
  type ApiKey,
  type Conversation,
  executionStatuses,
  gitProviders,
  type StartTask,
  sandboxStatuses,
  startTaskStatuses,
  toHexId,
} from "@tern/core";

/**
 * The JSON records of responses (DESIGN, API contracts), with the functions that make them from
 * domain types. Ids are written as 32 hex characters, datetimes as ISO 8601 UTC ending in Z.
 */
const hexId = z
  .string()
  .regex(/^[0-9a-f]{32}$/)
  .openapi({ example: "0f8fad5bd9cb469fa16570867728950e" });
const datetime = z.string().openapi({ format: "date-time", example: "2026-11-22T21:11:34.123456Z" });
const hexOrNull = (id: string | null): string | null => (id === null ? null : toHexId(id));

export const textContentSchema = z.object({ type: z.literal("text"), text: z.string() });

export const errorSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: "validation_failed" }),
      message: z.string(),
      details: z.unknown().optional(),
    }),
  })
  .openapi("Error");

export const apiKeyRecordSchema = z
  .object({
    id: hexId,
    name: z.string().nullable(),
    prefix: z.string().openapi({ description: "The first characters of the key, to tell keys apart" }),
    created_at: datetime,
    expires_at: datetime.nullable(),
    last_used_at: datetime.nullable(),
  })
  .openapi("ApiKey");

export const toApiKeyRecord = (k: ApiKey): z.infer<typeof apiKeyRecordSchema> => ({
  id: toHexId(k.id),
  name: k.name,
  prefix: k.prefix,
  created_at: k.createdAt,
  expires_at: k.expiresAt,
  last_used_at: k.lastUsedAt,
});

export const startRequestSchema = z
  .object({
    title: z.string().nullable().optional(),
    initial_message: z
      .object({
        role: z.literal("user"),
        content: z.array(textContentSchema),
        run: z.boolean().optional(),
      })
      .nullable()
      .optional(),
    llm_model: z.string().nullable().optional(),
    selected_repository: z.string().nullable().optional(),
    selected_branch: z.string().nullable().optional(),
    git_provider: z.enum(gitProviders).nullable().optional(),
  })
  .openapi("StartRequest");

export const startTaskRecordSchema = z
  .object({
    id: hexId,
    created_by_user_id: hexId,
    status: z.enum(startTaskStatuses),
    detail: z.string().nullable(),
    app_conversation_id: hexId.nullable(),
    sandbox_id: hexId.nullable(),
    agent_server_url: z.string().nullable(),
    request: startRequestSchema,
    created_at: datetime,
    updated_at: datetime,
  })
  .openapi("StartTask");

export const toStartTaskRecord = (t: StartTask): z.infer<typeof startTaskRecordSchema> => ({
  id: toHexId(t.id),
  created_by_user_id: toHexId(t.userId),
  status: t.status,
  detail: t.detail,
  app_conversation_id: hexOrNull(t.appConversationId),
  sandbox_id: hexOrNull(t.sandboxId),
  agent_server_url: t.agentServerUrl,
  request: t.request,
  created_at: t.createdAt,
  updated_at: t.updatedAt,
});

export const conversationRecordSchema = z
  .object({
    id: hexId,
    created_by_user_id: hexId,
    title: z.string().nullable(),
    sandbox_id: hexId.nullable(),
    sandbox_status: z.enum(sandboxStatuses),
    execution_status: z.enum(executionStatuses),
    conversation_url: z.string().openapi({ format: "uri" }),
    session_api_key: z.string(),
    selected_repository: z.string().nullable(),
    selected_branch: z.string().nullable(),
    git_provider: z.enum(gitProviders).nullable(),
    llm_model: z.string().nullable(),
    metrics: z.record(z.string(), z.number()),
    created_at: datetime,
    updated_at: datetime,
  })
  .openapi("AppConversation");

export const toConversationRecord = (c: Conversation, publicUrl: string): z.infer<typeof conversationRecordSchema> => ({
  id: toHexId(c.id),
  created_by_user_id: toHexId(c.userId),
  title: c.title,
  sandbox_id: hexOrNull(c.sandboxId),
  sandbox_status: c.sandboxStatus,
  execution_status: c.executionStatus,
  conversation_url: `${publicUrl}/api/v1/conversation/${toHexId(c.id)}`,
  session_api_key: c.sessionApiKey,
  selected_repository: c.selectedRepository,
  selected_branch: c.selectedBranch,
  git_provider: c.gitProvider,
  llm_model: c.llmModel,
  metrics: c.metrics,
  created_at: c.createdAt,
  updated_at: c.updatedAt,
});

/** Error responses every authenticated route may give, for the OpenAPI document. */
export const errorResponses = {
  400: { description: "Malformed request or page_id", content: { "application/json": { schema: errorSchema } } },
  401: {
    description: "No key, or an unknown, revoked or expired one",
    content: { "application/json": { schema: errorSchema } },
  },
  422: {
    description: "Validation failed; the message names the field",
    content: { "application/json": { schema: errorSchema } },
  },
} as const;

export const notFoundResponse = {
  404: { description: "Unknown, or not the caller's", content: { "application/json": { schema: errorSchema } } },
} as const;

/** Routes a conversation's session key may also call (its own conversation only). */
export const sessionReadableSecurity: Record<string, string[]>[] = [
  { bearerAuth: [] },
  { accessToken: [] },
  { sessionApiKey: [] },
];
