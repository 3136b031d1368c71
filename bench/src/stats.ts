/** Latency samples in milliseconds, summarised the same way for every row. */
export interface LatencySummary {
  n: number;
  p50: number;
  p95: number;
  /** NaN below P99_MIN_SAMPLES: the nearest rank of fewer is the single worst sample, not a p99. */
  p99: number;
  mean: number;
  min: number;
  max: number;
}

/** Nearest-rank percentile of sorted samples. */
const rank = (sorted: number[], p: number): number => {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
};

/** The fewest samples a p99 is given from; below, a row shows p95 and the maximum. */
const P99_MIN_SAMPLES = 200;

export type TailKey = "p95" | "p99" | "max";

/**
 * The tail a row may show of `s`: p99 (with p95 when asked) from 200 samples or more, else p95 and
 * the maximum, named as such.
 */
export const tailKeys = (s: LatencySummary, withP95: boolean): TailKey[] =>
  s.n >= P99_MIN_SAMPLES ? (withP95 ? ["p95", "p99"] : ["p99"]) : ["p95", "max"];

/** "p99 12.3 ms" or "p95 10.1 ms, max 14.2 ms": the tail of `s` in a progress line. */
export const tailText = (s: LatencySummary): string =>
  tailKeys(s, false)
    .map((k) => `${k} ${s[k].toFixed(1)} ms`)
    .join(", ");

export const summarize = (samples: number[]): LatencySummary => {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((s, v) => s + v, 0);
  return {
    n: sorted.length,
    p50: rank(sorted, 50),
    p95: rank(sorted, 95),
    p99: sorted.length >= P99_MIN_SAMPLES ? rank(sorted, 99) : Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
};

/** Milliseconds since `start` (from performance.now()). */
export const since = (start: number): number => performance.now() - start;
