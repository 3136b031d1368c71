/**
 * How big a warm pool should be, from how often starts arrive and how long one refill takes. Pure,
 * so the arithmetic is tested on its own with a clock of the test's choosing.
 */

export interface PoolTargetInput {
  /** Claims per second (hits and misses: every start that looked in the pool). */
  ratePerSec: number;
  /** Time to create, start and warm up one sandbox (ms); null before the first one was made. */
  refillMs: number | null;
  /** SANDBOX_POOL_SIZE: never fewer. */
  min: number;
  /** SANDBOX_POOL_MAX: never more. */
  max: number;
  /** Head room over the mean: arrivals bunch up, and refills slow down when many run at once. */
  safety: number;
}

/**
 * Little's law: while one sandbox refills (`refillMs`), `rate × refill` more starts arrive, so that
 * many must be warm (or warming) for none of them to miss; `safety` covers the bunching. Clamped to
 * [min, max]; with no refill measured yet, the floor.
 */
export const poolTarget = (input: PoolTargetInput): number => {
  const { min, safety } = input;
  const max = Math.max(min, input.max);
  if (input.refillMs === null || !(input.ratePerSec > 0)) return min;
  const needed = Math.ceil(input.ratePerSec * (input.refillMs / 1000) * safety);
  return Math.min(max, Math.max(min, needed));
};

/**
 * Arrivals per second as an exponentially weighted moving average over `windowMs`: each arrival
 * counts 1, decaying by e every window. Early on the sum has had less than a window to build up, so
 * it is divided by the part of a window that has passed since the first arrival (at least
 * `minSpanMs`, or one arrival alone would read as an arbitrary rate): a steady rate reads as itself
 * after a second, not after a window.
 */
export const createArrivalRate = (opts: { windowMs: number; minSpanMs?: number }) => {
  const tau = opts.windowMs;
  const minSpan = opts.minSpanMs ?? 1_000;
  let sum = 0;
  let last: number | null = null;
  let first: number | null = null;

  const decayed = (now: number): number => (last === null ? 0 : sum * Math.exp(-Math.max(0, now - last) / tau));

  return {
    record(now: number): void {
      sum = decayed(now) + 1;
      last = now;
      first ??= now;
    },
    /** Arrivals per second at `now`. */
    perSec(now: number): number {
      if (first === null) return 0;
      const span = Math.max(minSpan, now - first);
      return (decayed(now) / (tau * (1 - Math.exp(-span / tau)))) * 1000;
    },
  };
};

/**
 * Refill times (ms) as TCP estimates a round trip: a moving average and a moving mean deviation,
 * the newest sample weighted `alpha`. `get` is the average plus two deviations: on a loaded engine
 * refills have long tails, and the pool must cover the slow ones too, not the mean alone.
 */
export const createRefillEstimate = (alpha = 0.3) => {
  let mean: number | null = null;
  let dev = 0;
  return {
    add(sample: number): void {
      if (mean === null) {
        mean = sample;
        dev = sample / 2;
        return;
      }
      dev += alpha * (Math.abs(sample - mean) - dev);
      mean += alpha * (sample - mean);
    },
    get: (): number | null => (mean === null ? null : mean + 2 * dev),
  };
};
