import { z } from "zod";
import { executionStatuses, gitProviders, sandboxStatuses } from "../domain.ts";
import { datetimeSchema, hexIdSchema } from "./formats.ts";
import { metricsSnapshotSchema } from "./metrics.ts";
import { agentTypes, conversationTriggers, messageContentSchema } from "./start-request.ts";

/** A conversation as clients see it, shaped as OpenHands' AppConversation. */
export const conversationRecordSchema = z
  .object({
    id: hexIdSchema,
    created_by_user_id: hexIdSchema,
    title: z.string().nullable(),
    sandbox_id: hexIdSchema.nullable(),
    sandbox_status: z.enum(sandboxStatuses),
    execution_status: z.enum(executionStatuses),
    conversation_url: z.string().meta({ format: "uri" }),
    agent_server_url: z.string().nullable().meta({
      description: "The agent-server API of its sandbox ({PUBLIC_URL}/agent/{sandbox_id}); null without a sandbox",
    }),
    session_api_key: z.string().nullable().meta({
      description: "The conversation's session key (X-Session-API-Key); null once revoked (as OpenHands: str | null)",
    }),
    selected_repository: z.string().nullable(),
    selected_branch: z.string().nullable(),
    git_provider: z.enum(gitProviders).nullable(),
    llm_model: z.string().nullable(),
    trigger: z.enum(conversationTriggers).nullable(),
    pr_number: z.array(z.number().int()),
    parent_conversation_id: hexIdSchema.nullable(),
    sub_conversation_ids: z.array(hexIdSchema),
    public: z.boolean().nullable(),
    agent_type: z.enum(agentTypes),
    metrics: metricsSnapshotSchema,
    created_at: datetimeSchema,
    updated_at: datetimeSchema,
  })
  .meta({ id: "AppConversation" });

export type ConversationRecord = z.infer<typeof conversationRecordSchema>;

const messageContent = z.array(messageContentSchema).min(1).max(100);

/** OpenHands' SendMessageRequest (the agent server's route: `run` defaults to false). */
export const sendMessageRequestSchema = z
  .object({
    role: z.literal("user").default("user"),
    content: messageContent,
    run: z.boolean().default(false).meta({ description: "Start a run of the agent if none is going on" }),
  })
  .meta({ id: "SendMessageRequest" });

export type SendMessageRequest = z.infer<typeof sendMessageRequestSchema>;

/** OpenHands' AppSendMessageRequest (the app server's route: `run` defaults to true). */
export const appSendMessageRequestSchema = z
  .object({
    role: z.literal("user").default("user"),
    content: messageContent,
    run: z.boolean().default(true).meta({ description: "Start a run of the agent if none is going on" }),
  })
  .meta({ id: "AppSendMessageRequest" });

/** OpenHands' AppSendMessageResponse. */
export const appSendMessageResponseSchema = z
  .object({
    success: z.boolean(),
    sandbox_status: z.enum(sandboxStatuses),
    message: z.string().nullable(),
  })
  .meta({ id: "AppSendMessageResponse" });

/** A message queued for a conversation still starting (OpenHands' pending messages). */
export const pendingMessageRequestSchema = z
  .object({ role: z.literal("user").default("user"), content: messageContent })
  .meta({ id: "PendingMessageRequest" });

export const pendingMessageResponseSchema = z
  .object({
    id: hexIdSchema,
    queued: z.boolean().meta({ description: "True while it waits for READY; false: delivered at once" }),
    position: z.number().int().meta({ description: "1-based place in the queue (0 once delivered)" }),
  })
  .meta({ id: "PendingMessageResponse" });

/**
 * OpenHands' AppConversationUpdateRequest: only the fields given change. Clearing the repository
 * needs the branch and provider cleared too.
 */
export const conversationUpdateRequestSchema = z
  .object({
    title: z.string().min(1).max(500).optional(),
    public: z.boolean().nullable().optional(),
    selected_repository: z.string().nullable().optional(),
    selected_branch: z.string().nullable().optional(),
    git_provider: z.enum(gitProviders).nullable().optional(),
  })
  .meta({ id: "AppConversationUpdateRequest" });

export type ConversationUpdateRequest = z.infer<typeof conversationUpdateRequestSchema>;
