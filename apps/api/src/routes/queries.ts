import { z } from "@hono/zod-openapi";
import { decodePageCursor, encodePageCursor } from "../page-cursor.ts";

export const MAX_BATCH_IDS = 100;
export const MAX_PAGE_SIZE = 100;

/** `?ids=a&ids=b`: Hono hands over a string for one value and an array for several. */
export const idsQuery = z.object({
  ids: z
    .preprocess(
      (v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]),
      z.array(z.string()).min(1, "give at least one id").max(MAX_BATCH_IDS, `at most ${MAX_BATCH_IDS} ids`),
    )
    .openapi({
      param: { style: "form", explode: true },
      type: "array",
      items: { type: "string" },
      description: `Ids (32 hex or uuid), the parameter repeated once per id; 1 to ${MAX_BATCH_IDS}`,
    }),
});

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

/** A listing's keyset position: the (created_at, id) of the last item it returned. */
export const createdPosition = z.object({ t: z.string().min(1), id: z.uuid() });

/**
 * One page of a newest-first listing: decodes `page_id` (signed, bound to `scope`), asks `fetch`
 * for up to limit + 1 rows after that position, and signs the next position when there is more.
 */
export const newestFirstPage = async <Row extends { createdAt: string; id: string }, Item>(opts: {
  secret: string;
  scope: string;
  limit: number;
  pageId: string | undefined;
  fetch: (after: { createdAt: string; id: string } | null) => Promise<Row[]>;
  toItem: (row: Row) => Item;
}): Promise<{ items: Item[]; next_page_id: string | null }> => {
  const after = opts.pageId ? decodePageCursor(opts.secret, opts.scope, opts.pageId, createdPosition) : null;
  const rows = await opts.fetch(after && { createdAt: after.t, id: after.id });
  const page = rows.slice(0, opts.limit);
  const last = page.at(-1);
  const next =
    rows.length > opts.limit && last
      ? encodePageCursor(opts.secret, opts.scope, { t: last.createdAt, id: last.id })
      : null;
  return { items: page.map(opts.toItem), next_page_id: next };
};
