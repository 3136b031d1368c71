import { defineConfig } from "vitest/config";
import { measureTimeScale, scaled } from "./packages/testing/src/time-scale.ts";

// Measured once for the run, before any test process starts (they inherit it): every deadline a test
// sets is scaled to this machine's Docker (packages/testing/src/time-scale.ts). Only when vitest runs
// the tests, not when a tool (knip) reads this file.
if (process.env.VITEST && !process.env.TERN_TEST_TIME_SCALE) {
  process.env.TERN_TEST_TIME_SCALE = String(measureTimeScale(process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest"));
  console.log(`[tern] test deadlines x${process.env.TERN_TEST_TIME_SCALE} (TERN_TEST_TIME_SCALE, measured)`);
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
    testTimeout: scaled(180_000),
    hookTimeout: scaled(120_000),
    // Each file owns its database, Redis prefix and sandbox network; two cores run two files at once.
    maxWorkers: 2,
    // In CI a failed test runs once more, and the report marks it ("retry x1"): a flaky test must not
    // sink a whole run of real Docker, Postgres and Redis work, yet it stays visible, to be fixed.
    // A test that fails twice fails the run. Locally every failure is final.
    retry: process.env.CI ? 1 : 0,
    globalSetup: ["packages/testing/src/global-setup.ts"],
    setupFiles: ["vitest.setup.ts"],
  },
});
