import { ensureTemplateDatabase } from "./database.ts";

/** Runs once per test run: the migrated template every test database is cloned from. */
export default async function setup(): Promise<void> {
  await ensureTemplateDatabase();
}
