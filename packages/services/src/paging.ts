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

/**
 * One page of a keyset listing: decodes `page_id` (signed, bound to `scope`) into the position it
 * names, asks `fetch` for up to limit + 1 rows after it, and signs the last row's position when
 * there is more. `position` says how a row's position is written in a cursor and read back.
 */
const keysetPage = async <Row, After, Position>(opts: {
  secret: string;
  scope: string;
  limit: number;
  pageId: string | undefined;
  fetch: (after: After | null) => Promise<Row[]>;
  position: { schema: z.ZodType<Position>; of: (row: Row) => Position; after: (p: Position) => After };
}): Promise<Page<Row>> => {
  const at = opts.pageId ? decodePageCursor(opts.secret, opts.scope, opts.pageId, opts.position.schema) : null;
  const rows = await opts.fetch(at && opts.position.after(at));
  const items = rows.slice(0, opts.limit);
  const last = items.at(-1);
  const more = rows.length > opts.limit && last !== undefined;
  return { items, next_page_id: more ? encodePageCursor(opts.secret, opts.scope, opts.position.of(last)) : null };
};

interface PageRequest<Row, After> {
  secret: string;
  scope: string;
  limit: number;
  pageId: string | undefined;
  fetch: (after: After | null) => Promise<Row[]>;
}

/** A listing's keyset position: the (created_at, id) of the last item it returned. */
const createdPosition = z.object({ t: z.string().min(1), id: z.uuid() });

/** One page of a newest-first listing (its position: the last row's created_at and id). */
export const newestFirstPage = <Row extends { createdAt: string; id: string }>(
  opts: PageRequest<Row, { createdAt: string; id: string }>,
): Promise<Page<Row>> =>
  keysetPage({
    ...opts,
    position: {
      schema: createdPosition,
      of: (row) => ({ t: row.createdAt, id: row.id }),
      after: (p) => ({ createdAt: p.t, id: p.id }),
    },
  });

/** A sorted listing's keyset position: the sort key (as text) and id of the last item it returned. */
const sortedPosition = z.object({ k: z.string(), id: z.uuid() });

/**
 * One page of a listing in any of its sort orders: its position is the last row's sort key
 * (`keyOf`) and id. `scope` must name the order and the filters, so a cursor is only good for the
 * listing it came from.
 */
export const sortedPage = <Row extends { id: string }>(
  opts: PageRequest<Row, { key: string; id: string }> & { keyOf: (row: Row) => string },
): Promise<Page<Row>> =>
  keysetPage({
    ...opts,
    position: {
      schema: sortedPosition,
      of: (row) => ({ k: opts.keyOf(row), id: row.id }),
      after: (p) => ({ key: p.k, id: p.id }),
    },
  });

/** A listing's search: the caller's rows matching `filter` in `order`, a page of `limit` after `pageId`. */
export interface ListingRequest<Filter, Order> {
  /** Null: the filter can match nothing (an id that is no id); the answer is empty. */
  filter: Filter | null;
  order: Order;
  limit: number;
  pageId: string | undefined;
}

/** A repository of rows that belong to users, searched and counted per user (conversations, start tasks). */
interface OwnedRows<Row, Filter, Order> {
  searchForUser(
    userId: string,
    opts: { limit: number; filter: Filter; order: Order; after: { key: string; id: string } | null },
  ): Promise<Row[]>;
  countForUser(userId: string, filter: Filter): Promise<number>;
}

/**
 * The search and the count of a listing of the caller's rows named `listing`, sorted and filtered:
 * the owner scoping is written here once. Cursors are bound to the listing, the owner, the order
 * and every filter; a null filter (one that can match nothing) answers empty.
 */
export const ownedListing = <Row extends { id: string }, Filter, Order>(
  listing: string,
  rows: (db: PagedReadDeps["db"]) => OwnedRows<Row, Filter, Order>,
  keyOf: (row: Row, order: Order) => string,
) => ({
  search: async (
    deps: PagedReadDeps,
    caller: { userId: string },
    req: ListingRequest<Filter, Order>,
  ): Promise<Page<Row>> => {
    const { filter, order, limit } = req;
    if (!filter) return { items: [], next_page_id: null };
    return sortedPage({
      secret: deps.config.cursorSecret,
      scope: JSON.stringify([listing, caller.userId, order, filter]),
      limit,
      pageId: req.pageId,
      fetch: (after) => rows(deps.db).searchForUser(caller.userId, { limit, filter, order, after }),
      keyOf: (row) => keyOf(row, order),
    });
  },
  count: async (deps: Pick<PagedReadDeps, "db">, caller: { userId: string }, filter: Filter | null): Promise<number> =>
    filter ? rows(deps.db).countForUser(caller.userId, filter) : 0,
});
