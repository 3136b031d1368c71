import { afterAll } from "vitest";
import { removeOwnTestNetwork } from "./packages/testing/src/test-networks.ts";

// Runs in every test file's process before its tests. Its afterAll runs after the file's own (hooks
// unwind as a stack), once the file has removed its sandboxes: its network goes with them.
afterAll(async () => {
  await removeOwnTestNetwork();
});
