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
    globalSetup: ["packages/testing/src/global-setup.ts"],
  },
});
