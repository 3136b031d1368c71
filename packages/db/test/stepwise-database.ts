import { randomBytes } from "node:crypto";
import { Migrator } from "kysely/migration";
import pg from "pg";
import { createDb, type DbHandle } from "../src/connection.ts";
import { migrations } from "../src/migrations/index.ts";

/**
 * A database of a migration test's own, left unmigrated so the test can migrate it step by step
 * (the shared template is already at the latest), with a migrator ordered as `migrate.ts` orders.
 */
export const createStepwiseDatabase = async (): Promise<{
  handle: DbHandle;
  migrator: Migrator;
  close: () => Promise<void>;
}> => {
  const admin = new URL(
    process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres",
  );
  admin.pathname = "/postgres";
  const name = `tern_test_${randomBytes(6).toString("hex")}`;
  const url = new URL(admin);
  url.pathname = `/${name}`;
  const withAdmin = async (query: string) => {
    const c = new pg.Client({ connectionString: admin.toString() });
    await c.connect();
    try {
      await c.query(query);
    } finally {
      await c.end();
    }
  };

  await withAdmin(`create database ${name}`);
  const handle = createDb(url.toString(), { max: 2 });
  const migrator = new Migrator({
    db: handle.db,
    provider: { getMigrations: async () => migrations },
    allowUnorderedMigrations: true,
  });
  return {
    handle,
    migrator,
    async close() {
      await handle.close();
      await withAdmin(`drop database if exists ${name}`);
    },
  };
};
