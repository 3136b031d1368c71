import { z } from "@hono/zod-openapi";
import { parseIsoTimestamp } from "@tern/core";

const MAX_BATCH_IDS = 100;
const MAX_PAGE_SIZE = 100;

/** A repeated id parameter: Hono hands over a string for one value and an array for several. */
const idList = () =>
  z
    .preprocess(
      (v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]),
      z.array(z.string()).min(1, "give at least one id").max(MAX_BATCH_IDS, `at most ${MAX_BATCH_IDS} ids`),
    )
    .openapi({
      param: { style: "form", explode: true },
      type: "array",
      items: { type: "string" },
      description: `Ids (32 hex or uuid), the parameter repeated once per id; 1 to ${MAX_BATCH_IDS}`,
    });

/** `?ids=a&ids=b` (the app-conversation routes' name). */
export const idsQuery = z.object({ ids: idList() });

/** `?id=a&id=b` (the sandbox and sandbox-spec routes' name, as OpenHands spells it there). */
export const idQuery = z.object({ id: idList() });

/** `limit` and `page_id` of every listing. */
export const pageQuery = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE_SIZE)
    .default(MAX_PAGE_SIZE)
    .openapi({ description: `Page size, 1 to ${MAX_PAGE_SIZE}`, type: "integer" }),
  page_id: z
    .string()
    .min(1)
    .max(2048)
    .optional()
    .openapi({ description: "The next_page_id of the previous page (opaque)" }),
};

/**
 * A batch lookup's answer: one entry per id asked, the record or null. (A union, not `.nullable()`:
 * on a named schema that would make the component itself nullable in the document.)
 */
export const batchSchema = <T extends z.ZodType>(record: T) => z.array(z.union([record, z.null()]));

export const pageSchema = <T extends z.ZodType>(item: T, name: string) =>
  z
    .object({
      items: z.array(item),
      next_page_id: z
        .string()
        .nullable()
        .openapi({ description: "Give as page_id for the next page; null at the end" }),
    })
    .openapi(name);

/** A sorted listing's request, from its query and the filter made of it (null: it matches nothing). */
export const listingRequest = <Filter, Order>(
  query: { sort_order: Order; limit: number; page_id?: string | undefined },
  filter: Filter | null,
) => ({ filter, order: query.sort_order, limit: query.limit, pageId: query.page_id });

const timestampFilter = (description: string) =>
  z
    .string()
    .refine((v) => parseIsoTimestamp(v) !== null, "must be an ISO 8601 timestamp (no zone means UTC)")
    .transform((v) => parseIsoTimestamp(v)?.text ?? v)
    .optional()
    .openapi({ type: "string", format: "date-time", description, example: "2026-11-22T21:11:34.123456Z" });

/** created_at__gte/lt and updated_at__gte/lt: the time windows of the conversation and start-task listings. */
export const timeWindowQuery = {
  created_at__gte: timestampFilter("Created at or after (inclusive); ISO 8601, no zone means UTC"),
  created_at__lt: timestampFilter("Created before (exclusive)"),
  updated_at__gte: timestampFilter("Updated at or after (inclusive)"),
  updated_at__lt: timestampFilter("Updated before (exclusive)"),
};
