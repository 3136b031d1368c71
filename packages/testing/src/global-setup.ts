import { ensureTemplateDatabase } from "./database.ts";
import { removeStaleTestNetworks } from "./test-networks.ts";

/** Runs once per test run: the migrated template every test database is cloned from. */
export default async function setup(): Promise<() => Promise<void>> {
  await Promise.all([ensureTemplateDatabase(), removeStaleTestNetworks()]);
  // What a file could not remove (a sandbox it left behind): gone with the run.
  return removeStaleTestNetworks;
}
