import { defineConfig } from "vitest/config";

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
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file owns its database and Redis prefix; two cores run two files at once.
    maxWorkers: 2,
    // In CI a failed test runs once more, and the report marks it ("retry x1"): a flaky test must not
    // sink a whole run of real Docker, Postgres and Redis work, yet it stays visible, to be fixed.
    // A test that fails twice fails the run. Locally every failure is final.
    retry: process.env.CI ? 1 : 0,
    globalSetup: ["packages/testing/src/global-setup.ts"],
  },
});
