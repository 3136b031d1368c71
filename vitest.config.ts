import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { measureTimeScale, scaled } from "./packages/testing/src/time-scale.ts";

// Measured once for the run, before any test process starts (they inherit it): every deadline a test
// sets is scaled to this machine's Docker (packages/testing/src/time-scale.ts). Only when vitest runs
// the tests, not when a tool (knip) reads this file.
if (process.env.VITEST && !process.env.TERN_TEST_TIME_SCALE) {
  process.env.TERN_TEST_TIME_SCALE = String(measureTimeScale(process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest"));
  console.log(`[tern] test deadlines x${process.env.TERN_TEST_TIME_SCALE} (TERN_TEST_TIME_SCALE, measured)`);
}

/**
 * The files that take minutes start first, so two workers end together. Vitest orders by the last
 * run's durations, but a clean checkout (CI) has none and falls back to file size, which would start
 * the bench's speed gate (a small file, a minute or more of work) near the end.
 */
const LONGEST_FIRST = [
  "bench/test/gate.test.ts",
  "apps/worker/test/warm-pool.test.ts",
  "apps/api/test/start-script.test.ts",
  "apps/worker/test/two-engines.test.ts",
  "packages/agent/test/terminal.test.ts",
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = LONGEST_FIRST.findIndex((name) => f.moduleId.endsWith(name));
      return i === -1 ? LONGEST_FIRST.length : i;
    };
    return (await super.sort(files))
      .map((f, i) => ({ f, i }))
      .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
      .map(({ f }) => f);
  }
}

export default defineConfig({
  test: {
    include: [
      "apps/*/src/**/*.test.ts",
      "apps/*/test/**/*.test.ts",
      "packages/*/src/**/*.test.ts",
      "packages/*/test/**/*.test.ts",
      "bench/test/**/*.test.ts",
    ],
    pool: "forks",
    // The two test processes are kept across files, with the modules they loaded: each file used to
    // start a process and import the service's modules afresh, 208 s of a CI run's 827 (18 s now).
    // Files share no state through modules: each makes its own database, Redis prefix, network and
    // service processes, and none mocks a module or leaves the environment changed.
    isolate: false,
    testTimeout: scaled(180_000),
    hookTimeout: scaled(120_000),
    // Each file owns its database, Redis prefix and sandbox network; two cores run two files at once.
    maxWorkers: 2,
    // No retry, in CI or locally: a test that fails once is a failure. A retry hid flaky tests
    // (and doubled the time a slow failure cost) instead of making them fixed.
    retry: 0,
    sequence: { sequencer: LongestFirst },
    globalSetup: ["packages/testing/src/global-setup.ts"],
    setupFiles: ["vitest.setup.ts"],
  },
});
