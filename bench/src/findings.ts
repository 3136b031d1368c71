/**
 * `pnpm bench:report`: writes the findings table of bench/README.md (between its markers) from the
 * results files of the latest run of record: three full runs made by `pnpm bench:record`, all kept,
 * none chosen. Each row shows the median of the three and their minimum and maximum; "met" is the
 * bench's own verdict in each run, copied, and the row counts as met when two of the three met it
 * (for a single bound that is the verdict on the median).
 *
 *   node --import tsx bench/src/findings.ts [--record ID] [--check]
 *
 * `--check` writes nothing and exits 1 when README.md differs from what it would write.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { BenchResult, BenchRow } from "./report.ts";

export const RUNS_OF_RECORD = 3;
const BEGIN = "<!-- findings:begin (written by pnpm bench:report from the results files; do not edit) -->";
const END = "<!-- findings:end -->";

const resultsDir = fileURLToPath(new URL("../results/", import.meta.url));
const readme = fileURLToPath(new URL("../README.md", import.meta.url));

interface RecordRun {
  file: string;
  result: BenchResult;
}

/** The runs of each record id found in `dir`, in the order they started. */
export const recordsIn = async (dir: string): Promise<Map<string, RecordRun[]>> => {
  const records = new Map<string, RecordRun[]>();
  for (const file of (await readdir(dir)).filter((f) => f.endsWith(".json")).sort()) {
    const result = JSON.parse(await readFile(join(dir, file), "utf8")) as BenchResult;
    if (!result.record || result.quick) continue;
    const runs = records.get(result.record) ?? [];
    runs.push({ file, result });
    records.set(result.record, runs);
  }
  for (const runs of records.values()) runs.sort((a, b) => a.result.startedAt.localeCompare(b.result.startedAt));
  return records;
};

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

const num = (v: number): string => {
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
};

/** "median (min–max)" of one field over the runs that have it. */
const spread = (xs: number[], unit = ""): string => {
  if (xs.length === 0) return "–";
  const m = `${num(median(xs))}${unit}`;
  return xs.length === 1 ? m : `${m} (${num(Math.min(...xs))}–${num(Math.max(...xs))})`;
};

const clean = (label: string): string => label.trim().replaceAll("|", "/");

/** The markdown the README holds between its markers, for the runs of one record. */
export const findingsMarkdown = (record: string, runs: RecordRun[]): string => {
  const lines: string[] = [];
  lines.push(
    `Run of record \`${record}\`: ${runs.length} full runs, each kept in \`bench/results/\`; every figure below is in those files.`,
    "",
    "| run | started (UTC) | load average (1 min: min / mean / max) | machine |",
    "| --- | --- | --- | --- |",
  );
  for (const { file, result } of runs) {
    const m = result.machine;
    const load = m.load ? `${num(m.load.min)} / ${num(m.load.mean)} / ${num(m.load.max)}` : "not recorded";
    const failed = result.failures.length
      ? `; failed sections: ${result.failures.map((f) => f.section).join(", ")}`
      : "";
    lines.push(
      `| \`results/${file}\` | ${result.startedAt.slice(0, 16).replace("T", " ")}–${result.finishedAt.slice(11, 16)} | ${load} | ${m.cpus} cores, ${m.memoryGiB} GiB, Docker ${m.docker ?? "?"}${m.dockerStorage ? ` (${m.dockerStorage})` : ""}${failed} |`,
    );
  }
  lines.push(
    "",
    `Each row: the median of the runs that have it, with (minimum–maximum). "met" is each run's own verdict in run order, and the row's when ${Math.ceil(runs.length / 2)} of ${runs.length} met it.`,
    "",
    "| row (id) | value | floor | ratio | target | met (per run) | met |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  );
  const ids: string[] = [];
  for (const { result } of runs) for (const r of result.rows) if (r.met !== null && !ids.includes(r.id)) ids.push(r.id);
  for (const id of ids) {
    const rows = runs.map(({ result }) => result.rows.find((r) => r.id === id)).filter((r): r is BenchRow => !!r);
    const first = rows[0] as BenchRow;
    const floors = rows.flatMap((r) => (r.floor === null ? [] : [r.floor]));
    const ratios = rows.flatMap((r) => (r.ratio === null ? [] : [r.ratio]));
    const verdicts = runs.map(({ result }) => {
      const r = result.rows.find((x) => x.id === id);
      return r ? (r.met ? "yes" : "no") : "–";
    });
    const metCount = rows.filter((r) => r.met).length;
    const met = metCount * 2 > runs.length ? "**yes**" : "**no**";
    lines.push(
      `| ${clean(first.label)} (\`${id}\`) | ${spread(
        rows.map((r) => r.value),
        ` ${first.unit}`,
      )} | ${floors.length ? `${spread(floors)}${first.floorLabel ? ` (${clean(first.floorLabel)})` : ""}` : "–"} | ${spread(ratios, " ×")} | ${first.target ?? "–"} | ${verdicts.join(" / ")} | ${met} |`,
    );
  }
  return lines.join("\n");
};

/** README.md with its findings replaced by `markdown`. */
export const withFindings = (text: string, markdown: string): string => {
  const b = text.indexOf(BEGIN);
  const e = text.indexOf(END);
  if (b < 0 || e < b) throw new Error(`README.md has no ${BEGIN} … ${END} markers`);
  return `${text.slice(0, b + BEGIN.length)}\n${markdown}\n${text.slice(e)}`;
};

const main = async () => {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { record: { type: "string" }, check: { type: "boolean", default: false } },
    strict: true,
  });
  const records = await recordsIn(resultsDir);
  const complete = [...records.entries()].filter(([, runs]) => runs.length >= RUNS_OF_RECORD);
  const chosen = values.record
    ? [values.record, records.get(values.record)]
    : complete.sort((a, b) => (a[1][0]?.result.startedAt ?? "").localeCompare(b[1][0]?.result.startedAt ?? "")).at(-1);
  const [record, runs] = (chosen ?? []) as [string | undefined, RecordRun[] | undefined];
  if (!record || !runs || runs.length < RUNS_OF_RECORD) {
    throw new Error(`no run of record with ${RUNS_OF_RECORD} full runs in ${resultsDir} (pnpm bench:record makes one)`);
  }
  const text = await readFile(readme, "utf8");
  const next = withFindings(text, findingsMarkdown(record, runs));
  if (values.check) {
    if (next !== text) {
      process.stderr.write("bench/README.md's findings differ from the results files: run pnpm bench:report\n");
      process.exitCode = 1;
    }
    return;
  }
  await writeFile(readme, next);
  process.stdout.write(`bench/README.md: findings of ${record} (${runs.map((r) => r.file).join(", ")})\n`);
};

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
