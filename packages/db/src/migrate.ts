import type { Kysely } from "kysely";
import { type MigrationResultSet, Migrator } from "kysely/migration";
import { migrations } from "./migrations/index.ts";

export const migrationNames = (): string[] => Object.keys(migrations).sort();

/** Brings the schema to the latest migration; safe to run from several processes at once. */
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
