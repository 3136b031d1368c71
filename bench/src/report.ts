import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * One line of the bench table. `value` and `floor` are measured in the same run; `ratio` is
 * value / floor (for rates: floor / value, so a ratio above 1 always means "slower than the floor").
 */
export interface BenchRow {
  /** Stable key, e.g. "ready.pool.p50". */
  id: string;
  label: string;
  unit: "ms" | "events/s" | "req/s" | "starts/s" | "KiB" | "MiB" | "%";
  value: number;
  floor: number | null;
  floorLabel: string | null;
  /**
   * For a floor made of containers: the storage driver of the engine it ran on ("overlay2 on
   * extfs", "btrfs"), which sets how fast containers are made there.
   */
  floorStorage?: string;
  ratio: number | null;
  /** Human-readable target, e.g. "≤ 150 ms" or "≤ 1.15 × floor". */
  target: string | null;
  met: boolean | null;
  /** Anything else worth keeping (sample counts, other percentiles, stage breakdowns). */
  detail?: Record<string, unknown>;
}

type Higher = "lower-is-better" | "higher-is-better";

/** Builds a row and decides `met` from an absolute bound and/or a ratio bound. */
export const row = (input: {
  id: string;
  label: string;
  unit: BenchRow["unit"];
  value: number;
  floor?: number | null;
  floorLabel?: string | null;
  floorStorage?: string;
  better?: Higher;
  /** Absolute target: ≤ for lower-is-better, ≥ for higher-is-better. */
  absolute?: number;
  /** Ratio target: ratio ≤ this. */
  maxRatio?: number;
  detail?: Record<string, unknown>;
}): BenchRow => {
  const better = input.better ?? "lower-is-better";
  const floor = input.floor ?? null;
  let ratio: number | null = null;
  if (floor !== null && floor > 0 && input.value > 0) {
    ratio = better === "lower-is-better" ? input.value / floor : floor / input.value;
  }
  const targets: string[] = [];
  const checks: boolean[] = [];
  if (input.absolute !== undefined) {
    targets.push(`${better === "lower-is-better" ? "≤" : "≥"} ${input.absolute} ${input.unit}`);
    checks.push(better === "lower-is-better" ? input.value <= input.absolute : input.value >= input.absolute);
  }
  if (input.maxRatio !== undefined) {
    targets.push(`ratio ≤ ${input.maxRatio}`);
    checks.push(ratio !== null && ratio <= input.maxRatio);
  }
  return {
    id: input.id,
    label: input.label,
    unit: input.unit,
    value: input.value,
    floor,
    floorLabel: input.floorLabel ?? null,
    ...(input.floorStorage ? { floorStorage: input.floorStorage } : {}),
    ratio,
    target: targets.length ? targets.join(" and ") : null,
    met: checks.length ? checks.every(Boolean) : null,
    ...(input.detail ? { detail: input.detail } : {}),
  };
};

const fmt = (v: number | null, unit?: string): string => {
  if (v === null || Number.isNaN(v)) return "-";
  const n = Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
  return unit ? `${n} ${unit}` : n;
};

/** What the floor was, and on which storage driver when it is made of containers. */
export const floorNote = (r: BenchRow): string =>
  [r.floorLabel, r.floorStorage ? `on ${r.floorStorage}` : null].filter(Boolean).join(", ");

export const formatTable = (rows: BenchRow[]): string => {
  const header = ["row", "value", "floor", "ratio", "target", "met?"];
  const lines = rows.map((r) => [
    r.label,
    fmt(r.value, r.unit),
    r.floor === null ? "-" : `${fmt(r.floor, r.unit)}${floorNote(r) ? ` (${floorNote(r)})` : ""}`,
    r.ratio === null ? "-" : `${r.ratio.toFixed(2)}×`,
    r.target ?? "-",
    r.met === null ? "-" : r.met ? "yes" : "NO",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? "").length)));
  const render = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" │ ");
  return [render(header), widths.map((w) => "─".repeat(w)).join("─┼─"), ...lines.map(render)].join("\n");
};

export interface BenchResult {
  startedAt: string;
  finishedAt: string;
  quick: boolean;
  /** A `--gate` run: the CI speed gate's rows only. */
  gate?: boolean;
  /** The run of record this run is one of (`pnpm bench:record`, three full runs). */
  record?: string;
  machine: {
    cpus: number;
    memoryGiB: number;
    node: string;
    docker: string | null;
    /** The main engine's storage driver (engineStorage). */
    dockerStorage?: string;
    postgres: string | null;
    /** 1-minute load average, sampled every 15 s through the run (the machine may be shared). */
    load?: { min: number; mean: number; max: number };
  };
  rows: BenchRow[];
  /** Rows (sections) that failed to run, with the error: the table still prints the rest. */
  failures: { section: string; error: string }[];
}

/**
 * Writes results/<start time>.json, named to the second (2026-11-23T16-30-05Z), so runs on the same
 * day never overwrite each other; a quick run gets a -quick suffix.
 */
export const writeResult = async (dir: string, result: BenchResult): Promise<string> => {
  await mkdir(dir, { recursive: true });
  const stamp = `${result.startedAt.slice(0, 19).replace(/:/g, "-")}Z`;
  const file = join(dir, `${stamp}${result.gate ? "-gate" : result.quick ? "-quick" : ""}.json`);
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  return file;
};
