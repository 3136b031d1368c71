import { createHash, randomBytes } from "node:crypto";
import { createDb, type DbHandle, migrateToLatest, migrationNames, sqlCommandsFingerprint } from "@tern/db";
import pg from "pg";

/** The server's maintenance database; tests create and drop their own databases through it. */
export const adminDatabaseUrl = (): string => {
  const base =
    process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const u = new URL(base);
  u.pathname = "/postgres";
  return u.toString();
};

const databaseUrl = (name: string): string => {
  const u = new URL(adminDatabaseUrl());
  u.pathname = `/${name}`;
  return u.toString();
};

/**
 * Named by the migrations it holds and the SQL commands they load, so a new migration, or a command
 * file edited before its migration landed, makes a new template.
 */
export const templateDatabaseName = (): string =>
  `tern_test_tmpl_${createHash("sha256")
    .update(migrationNames().join(","))
    .update(sqlCommandsFingerprint())
    .digest("hex")
    .slice(0, 12)}`;

const withAdmin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
  const client = new pg.Client({ connectionString: adminDatabaseUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
};

/** Creates the migrated template once (idempotent; serialised by an advisory lock). */
export const ensureTemplateDatabase = async (): Promise<string> => {
  const name = templateDatabaseName();
  await withAdmin(async (c) => {
    await c.query("select pg_advisory_lock(874211)");
    try {
      const { rowCount } = await c.query("select 1 from pg_database where datname = $1", [name]);
      if (rowCount) return;
      const building = `${name}_build`;
      await c.query(`drop database if exists ${building}`);
      await c.query(`create database ${building}`);
      const handle = createDb(databaseUrl(building), { max: 1 });
      try {
        await migrateToLatest(handle.db);
      } finally {
        await handle.close();
      }
      // Renamed only once complete, so a crash never leaves a half-migrated template behind.
      await c.query(`alter database ${building} rename to ${name}`);
    } finally {
      await c.query("select pg_advisory_unlock(874211)");
    }
  });
  return name;
};

export interface TestDatabase extends DbHandle {
  name: string;
  url: string;
  /** Closes the pool and drops the database. */
  drop: () => Promise<void>;
}

/** A fresh, migrated database of the caller's own, cloned from the template (fast). */
export const createTestDatabase = async (): Promise<TestDatabase> => {
  const template = await ensureTemplateDatabase();
  const name = `tern_test_${randomBytes(6).toString("hex")}`;
  await withAdmin(async (c) => {
    await c.query(`create database ${name} template ${template}`);
  });
  const url = databaseUrl(name);
  const handle = createDb(url, { max: 5 });
  return {
    ...handle,
    name,
    url,
    drop: async () => {
      await handle.close();
      await withAdmin((c) => c.query(`drop database if exists ${name} with (force)`));
    },
  };
};
