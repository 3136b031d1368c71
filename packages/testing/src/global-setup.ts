import { execFileSync } from "node:child_process";
import { ensureTemplateDatabase } from "./database.ts";
import { repoRoot } from "./processes.ts";
import { removeStaleTestNetworks } from "./test-networks.ts";

/**
 * Runs once per test run: the migrated template every test database is cloned from, and the
 * compiled JavaScript (scripts/build.mjs, a few seconds) that every API, worker and CLI process a
 * test spawns runs (appEntry): once here instead of tsx compiling the source at every spawn.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await Promise.all([ensureTemplateDatabase(), removeStaleTestNetworks()]);
  if (!process.env.TERN_TEST_DIST) {
    execFileSync(process.execPath, ["scripts/build.mjs"], { cwd: repoRoot, stdio: "pipe" });
    // The test files' processes are forked after this, and inherit it.
    process.env.TERN_TEST_DIST = "1";
  }
  // What a file could not remove (a sandbox it left behind): gone with the run.
  return removeStaleTestNetworks;
}
