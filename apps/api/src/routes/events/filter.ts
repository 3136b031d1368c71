import { z } from "@hono/zod-openapi";
import { eventKinds, parseIsoTimestamp } from "@tern/core";
import type { EventFilter, EventQuery } from "@tern/services";

const timestampParam = (description: string) =>
  z
    .string()
    .refine((v) => parseIsoTimestamp(v) !== null, "must be an ISO 8601 timestamp (no zone means UTC)")
    .optional()
    .openapi({ format: "date-time", description, example: "2026-11-22T21:11:34.123456Z" });

/** The filters the search and the count share. */
export const eventFilterQuery = {
  kind__eq: z.enum(eventKinds).optional().openapi({ description: "Only events of this kind" }),
  timestamp__gte: timestampParam("Events at or after this time (inclusive); ISO 8601, no zone means UTC"),
  timestamp__lt: timestampParam("Events before this time (exclusive); ISO 8601, no zone means UTC"),
};

export const conversationParam = z.object({
  conversation_id: z.string().openapi({ description: "The conversation (app_conversation_id), 32 hex or uuid" }),
});

export const toEventQuery = (q: {
  kind__eq?: EventFilter["kind"];
  timestamp__gte?: string;
  timestamp__lt?: string;
}): EventQuery => ({
  ...(q.kind__eq !== undefined ? { kind: q.kind__eq } : {}),
  ...(q.timestamp__gte !== undefined ? { timestampGte: parseIsoTimestamp(q.timestamp__gte)?.text } : {}),
  ...(q.timestamp__lt !== undefined ? { timestampLt: parseIsoTimestamp(q.timestamp__lt)?.text } : {}),
});
