import { execFileSync } from "node:child_process";
import { readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureTemplateDatabase } from "./database.ts";
import { repoRoot } from "./processes.ts";
import { removeStaleTestNetworks } from "./test-networks.ts";

/** Written when a build ends: dist/ is at least as new as every source file older than it. */
const STAMP = join(repoRoot, "node_modules", ".tern-dist-built");

const newestUnder = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    const path = join(dir, entry.name);
    return Math.max(newest, entry.isDirectory() ? newestUnder(path) : statSync(path).mtimeMs);
  }, 0);

/** True when some source (or the build script) changed since the last build, or a dist/ is missing. */
const distIsStale = (): boolean => {
  const built = statSync(STAMP, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  let newest = statSync(join(repoRoot, "scripts", "build.mjs")).mtimeMs;
  for (const group of ["packages", "apps"]) {
    for (const name of readdirSync(join(repoRoot, group))) {
      const src = join(repoRoot, group, name, "src");
      if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) continue;
      if (!statSync(join(repoRoot, group, name, "dist"), { throwIfNoEntry: false })) return true;
      newest = Math.max(newest, newestUnder(src));
    }
  }
  return newest >= built;
};

/**
 * Runs once per test run: the migrated template every test database is cloned from, and the
 * compiled JavaScript that every API, worker and CLI process a test spawns runs (appEntry): built
 * once here (scripts/build.mjs, a few seconds) instead of tsx compiling the source at every spawn.
 * Only when a source changed since the last build: a build empties dist/ first, under the
 * processes of any other test run going on in this checkout.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await Promise.all([ensureTemplateDatabase(), removeStaleTestNetworks()]);
  if (!process.env.TERN_TEST_DIST) {
    if (distIsStale()) {
      const started = Date.now();
      execFileSync(process.execPath, ["scripts/build.mjs"], { cwd: repoRoot, stdio: "pipe" });
      // The build's start: a source saved during the build makes the next run build again.
      writeFileSync(STAMP, "");
      utimesSync(STAMP, new Date(started), new Date(started));
    }
    // The test files' processes are forked after this, and inherit it.
    process.env.TERN_TEST_DIST = "1";
  }
  // What a file could not remove (a sandbox it left behind): gone with the run.
  return removeStaleTestNetworks;
}
