import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { ensureTemplateDatabase } from "./database.ts";
import { repoRoot } from "./processes.ts";
import { removeStaleTestNetworks } from "./test-networks.ts";

/**
 * Runs once per test run: the migrated template every test database is cloned from, and dist/
 * (scripts/build.mjs, a no-op when nothing changed), which the API and worker processes that tests
 * start run from, as production does (startService).
 */
export default async function setup(): Promise<() => Promise<void>> {
  await Promise.all([
    ensureTemplateDatabase(),
    removeStaleTestNetworks(),
    promisify(execFile)(process.execPath, ["scripts/build.mjs"], { cwd: repoRoot }),
  ]);
  // What a file could not remove (a sandbox it left behind): gone with the run.
  return removeStaleTestNetworks;
}
