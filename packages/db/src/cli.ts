import { configFields, parseConfig } from "@tern/core";
import { z } from "zod";
import { createDb } from "./connection.ts";
import { migrateToLatest } from "./migrate.ts";

const config = parseConfig(z.object({ DATABASE_URL: configFields.DATABASE_URL }), process.env);
const { db, close } = createDb(config.DATABASE_URL);
try {
  const { results = [] } = await migrateToLatest(db);
  for (const r of results)
    process.stdout.write(`${r.status === "Success" ? "applied" : r.status}: ${r.migrationName}\n`);
  if (results.length === 0) process.stdout.write("database is up to date\n");
} finally {
  await close();
}
