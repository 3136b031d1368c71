/**
 * The spread of gate runs (`pnpm bench --gate`), from which GATE_TOLERANCE is chosen: for each gated
 * row, its ratio in every run, the median, minimum and maximum, and how far the worst run stood above
 * the median (max / median - 1); then each run's verdicts against the gate.
 *
 *   node --import tsx bench/src/experiments/gate-spread.mts results/*-gate.json
 */
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { formatVerdicts, GATED_ROWS, judgeGate } from "../gate.ts";
import type { BenchResult } from "../report.ts";

const files = process.argv.slice(2);
const runs = await Promise.all(
  files.map(async (f) => ({ file: basename(f), result: JSON.parse(await readFile(f, "utf8")) as BenchResult })),
);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
for (const { file, result } of runs) {
  const l = result.machine.load;
  console.log(
    `${file}: load average ${l ? `${l.min.toFixed(1)}-${l.max.toFixed(1)} (mean ${l.mean.toFixed(1)})` : "?"}`,
  );
}
console.log("| row | target | ratios (run order) | median | min | max | max / median - 1 |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const g of GATED_ROWS) {
  const ratios = runs.flatMap(({ result }) => {
    const r = result.rows.find((x) => x.id === g.id)?.ratio;
    return r === undefined || r === null ? [] : [r];
  });
  if (ratios.length === 0) {
    console.log(`| ${g.id} | ${g.target} | – | | | | |`);
    continue;
  }
  const m = median(ratios);
  console.log(
    `| ${g.id} | ${g.target} | ${ratios.map((r) => r.toFixed(2)).join(" ")} | ${m.toFixed(2)} | ${Math.min(...ratios).toFixed(2)} | ${Math.max(...ratios).toFixed(2)} | ${((Math.max(...ratios) / m - 1) * 100).toFixed(0)} % |`,
  );
}
for (const { file, result } of runs) console.log(`\n${file}\n${formatVerdicts(judgeGate(result))}`);
