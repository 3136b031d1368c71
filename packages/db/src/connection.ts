import { Kysely, PostgresDialect } from "kysely";
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
}

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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, pool, close: () => db.destroy() };
};
