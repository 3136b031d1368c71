import { execFileSync } from "node:child_process";

/**
 * How much slower this machine's Docker is than the one the tests' deadlines were written on.
 * A deadline that stands for Docker-bound work (waitFor, a service's readiness, a test's own timeout)
 * scales: on a machine whose engine takes three times as long to run a container, the same test must
 * wait three times as long for the same event, or it fails without any fault of the code. An
 * in-process bound (a cache's 100 ms, an interrupt's 1 s; waitFor's `inProcess`) is not scaled.
 *
 * TERN_TEST_TIME_SCALE, set by the operator or measured once by vitest.config.ts for the whole run
 * (and inherited by every test process): a number from 1 to MAX_SCALE.
 */
const MAX_SCALE = 6;

/** `docker run --rm` of the sandbox image on the machine the deadlines were written on, quiet (seconds). */
const REFERENCE_RUN_SECONDS = 0.4;

export const timeScale = (): number => {
  const v = Number(process.env.TERN_TEST_TIME_SCALE);
  return Number.isFinite(v) && v >= 1 ? Math.min(v, MAX_SCALE) : 1;
};

/** A deadline of `ms` on the reference machine, on this one. */
export const scaled = (ms: number): number => Math.round(ms * timeScale());

/**
 * Measures the scale: the faster of two `docker run --rm` of `image` (no network), against the
 * reference. 1 where Docker or the image is missing (the tests that need them fail on their own).
 */
export const measureTimeScale = (image: string): number => {
  const once = (): number => {
    const started = process.hrtime.bigint();
    execFileSync("docker", ["run", "--rm", "--network", "none", image, "true"], { stdio: "ignore", timeout: 60_000 });
    return Number(process.hrtime.bigint() - started) / 1e9;
  };
  try {
    const seconds = Math.min(once(), once());
    return Math.min(MAX_SCALE, Math.max(1, Math.round((seconds / REFERENCE_RUN_SECONDS) * 10) / 10));
  } catch {
    return 1;
  }
};
