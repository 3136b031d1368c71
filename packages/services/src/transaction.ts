import type { Database } from "@tern/db";
import type { Kysely } from "kysely";

/**
 * Runs `fn` in a transaction: the caller's, when `db` is one already (it composes a larger one),
 * else a new one.
 */
export const inTransaction = <T>(db: Kysely<Database>, fn: (trx: Kysely<Database>) => Promise<T>): Promise<T> =>
  db.isTransaction ? fn(db) : db.transaction().execute(fn);
