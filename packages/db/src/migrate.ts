import { ConfigError } from "@tern/core";
import { type Kysely, sql } from "kysely";
import { type MigrationResultSet, Migrator } from "kysely/migration";
import { migrations } from "./migrations/index.ts";

export const migrationNames = (): string[] => Object.keys(migrations).sort();

/**
 * Brings the schema to the latest migration. Run once per deploy (`pnpm db:migrate`: start.sh, the
 * compose `migrate` job), not by each process: Kysely's migrator holds a Postgres advisory lock
 * (pg_advisory_xact_lock) for the whole run, so two runs at once apply each migration once.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations run before the schema types hold.
export const migrateToLatest = async (db: Kysely<any>): Promise<MigrationResultSet> => {
  // Migrations written in parallel may land out of name order; a database that already ran a later
  // one still gets the earlier one.
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    allowUnorderedMigrations: true,
  });
  const result = await migrator.migrateToLatest();
  if (result.error) throw result.error;
  return result;
};

/** The migrations this release knows that the database has not applied (none: the schema is current). */
// biome-ignore lint/suspicious/noExplicitAny: read before the schema types can be trusted.
export const pendingMigrations = async (db: Kysely<any>): Promise<string[]> => {
  const table = await sql<{
    present: boolean;
  }>`select to_regclass('public.kysely_migration') is not null as present`.execute(db);
  if (!table.rows[0]?.present) return migrationNames();
  const applied = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
  const done = new Set(applied.rows.map((r) => r.name));
  return migrationNames().filter((n) => !done.has(n));
};

/**
 * The api and the worker check the schema at start instead of migrating: a schema behind this
 * release refuses the start with what to do, rather than each replica racing to change it.
 */
// biome-ignore lint/suspicious/noExplicitAny: read before the schema types can be trusted.
export const assertSchemaCurrent = async (db: Kysely<any>): Promise<void> => {
  const pending = await pendingMigrations(db);
  if (pending.length === 0) return;
  const shown = pending.slice(0, 5).join(", ") + (pending.length > 5 ? `, ... (${pending.length - 5} more)` : "");
  throw new ConfigError(
    "DATABASE_URL",
    `the database schema is behind this release: ${pending.length} migration(s) not applied (${shown}). ` +
      "Run the migrations first: `pnpm db:migrate` (start.sh does), or the compose `migrate` job.",
  );
};
