import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { BadRequestError } from "@tern/core";
import { type Database, deploymentSecretsRepository } from "@tern/db";
import type { Kysely } from "kysely";
import { z } from "zod";

/**
 * Opaque keyset cursors for `page_id`: the position of the last item of a page, base64url JSON,
 * with an HMAC over it and over the search it belongs to (`scope`: resource, filters, order). A
 * cursor that was forged, altered, or taken from another search fails the check and is a 400.
 */
/**
 * The cursors' HMAC secret: CURSOR_SECRET when configured, else a random one generated once and
 * kept in Postgres (deployment_secrets), so every API replica of the deployment signs alike and no
 * one can derive it from anything they know.
 */
export const resolveCursorSecret = async (db: Kysely<Database>, configured: string | undefined): Promise<string> =>
  configured ??
  (await deploymentSecretsRepository(db).getOrCreate("cursor_secret", () => randomBytes(32).toString("base64url")));

const mac = (secret: string, scope: string, body: string): Buffer =>
  createHmac("sha256", secret).update(scope).update("\n").update(body).digest();

export const encodePageCursor = (secret: string, scope: string, position: unknown): string => {
  const body = Buffer.from(JSON.stringify(position)).toString("base64url");
  return `${body}.${mac(secret, scope, body).toString("base64url")}`;
};

export const decodePageCursor = <T>(secret: string, scope: string, cursor: string, schema: z.ZodType<T>): T => {
  const invalid = new BadRequestError("page_id: not a page_id this search returned");
  const [body, signature, ...rest] = cursor.split(".");
  if (!body || !signature || rest.length > 0) throw invalid;
  const expected = mac(secret, scope, body);
  const given = Buffer.from(signature, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    throw invalid;
  }
  const result = schema.safeParse(parsed);
  if (!result.success) throw invalid;
  return result.data;
};

/** One page of a listing, as every listing answers. */
export interface Page<Item> {
  items: Item[];
  next_page_id: string | null;
}

/** What a paged read needs: the database and the secret its cursors are signed with. */
export interface PagedReadDeps {
  db: Kysely<Database>;
  config: { cursorSecret: string };
}

/** A listing's keyset position: the (created_at, id) of the last item it returned. */
const createdPosition = z.object({ t: z.string().min(1), id: z.uuid() });

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
}): Promise<Page<Item>> => {
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

/** A sorted listing's keyset position: the sort key (as text) and id of the last item it returned. */
const sortedPosition = z.object({ k: z.string(), id: z.uuid() });

/**
 * One page of a listing in any of its sort orders: as newestFirstPage, with the position being the
 * last item's sort key (`keyOf`) and id. `scope` must name the order and the filters, so a cursor
 * is only good for the listing it came from.
 */
export const sortedPage = async <Row extends { id: string }, Item>(opts: {
  secret: string;
  scope: string;
  limit: number;
  pageId: string | undefined;
  fetch: (after: { key: string; id: string } | null) => Promise<Row[]>;
  keyOf: (row: Row) => string;
  toItem: (row: Row) => Item;
}): Promise<Page<Item>> => {
  const after = opts.pageId ? decodePageCursor(opts.secret, opts.scope, opts.pageId, sortedPosition) : null;
  const rows = await opts.fetch(after && { key: after.k, id: after.id });
  const page = rows.slice(0, opts.limit);
  const last = page.at(-1);
  const next =
    rows.length > opts.limit && last
      ? encodePageCursor(opts.secret, opts.scope, { k: opts.keyOf(last), id: last.id })
      : null;
  return { items: page.map(opts.toItem), next_page_id: next };
};
