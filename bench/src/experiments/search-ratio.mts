/**
 * The events search's bound rows alone, with more samples than `--quick` takes (which has 30 a
 * page: too few to tell a 5 % change on a loaded machine), on the quick dataset or, with --full,
 * the bench's own. Runs `rounds` times and prints each page's ratio per round, and their median.
 * Usage: node --import tsx bench/src/experiments/search-ratio.mts [reps=300] [rounds=3] [--full]
 * (run `node scripts/build.mjs` first: the API runs from apps/api/dist, as the bench runs it).
 */
import { loadavg } from "node:os";
import { createContext } from "../context.ts";
import { eventsSearchRows } from "../rows/events-search.ts";

const [reps = 300, rounds = 3] = process.argv
  .slice(2)
  .filter((a) => /^\d+$/.test(a))
  .map(Number);
const ctx = createContext(!process.argv.includes("--full"));
const ratios = new Map<string, number[]>();
for (let r = 0; r < rounds; r++) {
  const rows = await eventsSearchRows({ ...ctx, progress: () => undefined }, { reps });
  const line: string[] = [];
  for (const row of rows.filter((x) => x.id.endsWith(".bound"))) {
    const ratio = row.value / (row.floor ?? Number.NaN);
    ratios.set(row.id, [...(ratios.get(row.id) ?? []), ratio]);
    line.push(`${row.id.split(".")[1]} ${row.value.toFixed(2)}/${row.floor?.toFixed(2)} ms ${ratio.toFixed(2)}×`);
  }
  process.stdout.write(`round ${r + 1} (load ${loadavg()[0]?.toFixed(1)}): ${line.join(", ")}\n`);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
process.stdout.write(
  `median: ${[...ratios].map(([id, xs]) => `${id.split(".")[1]} ${median(xs).toFixed(2)}×`).join(", ")}\n`,
);
