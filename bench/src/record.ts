/**
 * `pnpm bench:record`: a run of record. Three full runs of `pnpm bench`, one after another, each
 * writing its own results file (all kept, none chosen) marked with the record's id; then
 * `pnpm bench:report` writes bench/README.md's findings from them.
 *
 *   node --import tsx bench/src/record.ts [extra bench arguments]
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RUNS_OF_RECORD } from "./findings.ts";

const id = `${new Date().toISOString().slice(0, 19).replace(/:/g, "-")}Z`;
const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const findings = fileURLToPath(new URL("./findings.ts", import.meta.url));
let failed = 0;
for (let i = 1; i <= RUNS_OF_RECORD; i++) {
  process.stderr.write(`[bench:record ${id}] run ${i} of ${RUNS_OF_RECORD}\n`);
  const r = spawnSync(process.execPath, ["--import", "tsx", main, "--record", id, ...process.argv.slice(2)], {
    stdio: "inherit",
  });
  // A run with a failed section still wrote its results: it stays one of the three.
  if (r.status !== 0) failed++;
}
const report = spawnSync(process.execPath, ["--import", "tsx", findings, "--record", id], { stdio: "inherit" });
process.exitCode = failed > 0 || report.status !== 0 ? 1 : 0;
