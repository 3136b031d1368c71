import { z } from "@hono/zod-openapi";
import { parseId } from "@tern/core";
import { type ConversationFilter, conversationSortOrders } from "@tern/services";
import { timeWindowQuery } from "../queries.ts";

/** The filters GET /search and GET /count share (OpenHands' names). */
export const conversationFilterQuery = {
  title__contains: z
    .string()
    .max(500)
    .optional()
    .openapi({ description: "Titles containing this text, case-insensitively" }),
  ...timeWindowQuery,
  sandbox_id__eq: z.string().max(200).optional().openapi({ description: "Conversations of this sandbox" }),
  include_sub_conversations: z
    .enum(["true", "false"])
    .default("false")
    .transform((v) => v === "true")
    .openapi({ type: "boolean", description: "Also conversations started with a parent_conversation_id" }),
};

export const conversationSortQuery = {
  sort_order: z
    .enum(conversationSortOrders)
    .default("CREATED_AT_DESC")
    .openapi({ description: "CREATED_AT_DESC when absent" }),
};

type FilterQuery = z.output<z.ZodObject<typeof conversationFilterQuery>>;

/** Null when the filter can match nothing (a sandbox id that is no id). */
export const toConversationFilter = (q: FilterQuery): ConversationFilter | null => {
  const sandboxId = q.sandbox_id__eq === undefined ? undefined : parseId(q.sandbox_id__eq);
  if (sandboxId === null) return null;
  return {
    titleContains: q.title__contains,
    createdAtGte: q.created_at__gte,
    createdAtLt: q.created_at__lt,
    updatedAtGte: q.updated_at__gte,
    updatedAtLt: q.updated_at__lt,
    sandboxId,
    includeSubConversations: q.include_sub_conversations,
  };
};
