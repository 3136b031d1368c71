import { createHash } from "node:crypto";
import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from "kysely";
import pg from "pg";
import type { Database } from "./schema.ts";

const TIMESTAMPTZ_OID = 1184;
const INT8_OID = 20;

/**
 * "2026-11-22 21:11:34.12345+00" (session TimeZone UTC) → "2026-11-22T21:11:34.123450Z". Postgres
 * drops trailing zeros of the fraction; always six digits keep the strings sortable as text.
 */
export const pgTimestampToIso = (value: string): string => {
  const [date, rest = "00:00:00"] = value.split(" ");
  const [hms, fraction = ""] = rest.replace(/\+00(:00)?$/, "").split(".");
  return `${date}T${hms}.${fraction.padEnd(6, "0")}Z`;
};

// Per-pool parsers, so microseconds survive (a JS Date keeps only milliseconds) and
// bigint sequence numbers arrive as numbers; the global pg-types stay untouched.
const getTypeParser = ((oid: number, format?: "text" | "binary") => {
  if (oid === TIMESTAMPTZ_OID) return pgTimestampToIso;
  if (oid === INT8_OID) return (v: string) => Number(v);
  return pg.types.getTypeParser(oid, format as "text");
}) as typeof pg.types.getTypeParser;

export interface DbOptions {
  max?: number;
  statementTimeoutMs?: number;
  onError?: (err: Error) => void;
  /** Kysely's queries as named (prepared) statements, cached per connection (default on). */
  preparedStatements?: boolean;
}

/** Distinct statements prepared on one connection at most; later new ones go unnamed (parsed each time). */
const MAX_PREPARED_PER_CONNECTION = 512;
/** SQL text → statement name, shared by the connections; cleared past this many texts. */
const MAX_NAMED_TEXTS = 4_096;
const names = new Map<string, string>();

/** A statement's name: a hash of its text, so one text is one statement on every connection, and two never share one. */
export const statementName = (text: string): string => {
  let name = names.get(text);
  if (!name) {
    if (names.size >= MAX_NAMED_TEXTS) names.clear();
    name = `k${createHash("sha1").update(text).digest("base64url")}`;
    names.set(text, name);
  }
  return name;
};

/**
 * The pool as Kysely sees it, with each query with parameters sent as a named statement (pg's
 * `{ name, text, values }`): pg parses a name once per connection and, from then on, only binds
 * and executes it, and Postgres plans it once per connection (a generic plan once it has proved as
 * good): the hot queries (the key lookup, the events search, the step writes) skip parse and plan.
 * Generic: the name is a hash of the SQL text, whatever built it. Queries without parameters
 * (begin, commit) keep the simple protocol; `pool.query` used directly is untouched.
 */
const preparing = (pool: pg.Pool): PostgresPool => {
  const clients = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    const prepared = new Set<string>();
    const query = ((text: unknown, values?: unknown[]) => {
      if (typeof text !== "string" || !values || values.length === 0) {
        return (client.query as (...a: unknown[]) => unknown)(text, values);
      }
      const name = statementName(text);
      if (!prepared.has(name)) {
        if (prepared.size >= MAX_PREPARED_PER_CONNECTION) return client.query(text, values);
        prepared.add(name);
      }
      return client.query({ name, text, values });
    }) as PostgresPoolClient["query"];
    return {
      query,
      release: (destroy?: boolean) => client.release(destroy),
      // Kysely reads the backend's pid to cancel a query.
      get processID() {
        return (client as unknown as { processID?: number }).processID;
      },
    } as PostgresPoolClient;
  };
  return {
    options: pool.options,
    // What Kysely connects its query cancellation with, as it would take from the pool itself.
    Client: (pool as unknown as { Client?: PostgresPool["Client"] }).Client,
    connect: async () => {
      const client = await pool.connect();
      let w = clients.get(client);
      if (!w) {
        w = wrap(client);
        clients.set(client, w);
      }
      return w;
    },
    end: () => pool.end(),
  };
};

export interface DbHandle {
  db: Kysely<Database>;
  pool: pg.Pool;
  close: () => Promise<void>;
}

export const createDb = (connectionString: string, opts: DbOptions = {}): DbHandle => {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: opts.statementTimeoutMs ?? 30_000,
    idle_in_transaction_session_timeout: 60_000,
    options: "-c TimeZone=UTC",
    types: { getTypeParser },
  });
  // An idle client that loses its connection emits here; without a listener the process dies.
  pool.on("error", (err) => opts.onError?.(err));
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: opts.preparedStatements === false ? pool : preparing(pool) }),
  });
  return { db, pool, close: () => db.destroy() };
};
