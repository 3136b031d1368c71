import { describe, expect, it } from "vitest";
import { scaled } from "../src/time-scale.ts";
import { waitFor } from "../src/wait-for.ts";

describe("waitFor", () => {
  it("returns the first truthy value the check gives", async () => {
    let calls = 0;
    const value = await waitFor(() => (++calls >= 3 ? { calls } : null), { what: "three calls", intervalMs: 1 });
    expect(value).toEqual({ calls: 3 });
  });

  it("fails past the deadline, naming what it waited for and what it saw last", async () => {
    let last = "";
    await expect(
      waitFor(
        async () => {
          last = "WORKING";
          return false;
        },
        { what: "the task to be READY", timeoutMs: 30, intervalMs: 5, detail: () => `status ${last}` },
      ),
    ).rejects.toThrow(
      // The deadline scales with the machine (TERN_TEST_TIME_SCALE), and the failure names the one it used.
      new RegExp(`^timed out after ${scaled(30)} ms waiting for the task to be READY\nstatus WORKING$`),
    );
  });

  it("takes an in-process deadline as written, however slow this machine's Docker is", async () => {
    const measured = process.env.TERN_TEST_TIME_SCALE;
    process.env.TERN_TEST_TIME_SCALE = "4";
    try {
      const waits = (inProcess: boolean) =>
        waitFor(() => false, { what: "a cache entry to go", timeoutMs: 30, intervalMs: 5, inProcess });
      await expect(waits(true)).rejects.toThrow(/^timed out after 30 ms waiting for a cache entry to go$/);
      await expect(waits(false)).rejects.toThrow(/^timed out after 120 ms waiting for a cache entry to go$/);
    } finally {
      if (measured === undefined) delete process.env.TERN_TEST_TIME_SCALE;
      else process.env.TERN_TEST_TIME_SCALE = measured;
    }
  });

  it("fails at once when the check throws", async () => {
    let calls = 0;
    await expect(
      waitFor(
        () => {
          calls++;
          throw new Error("the start failed");
        },
        { what: "READY" },
      ),
    ).rejects.toThrow("the start failed");
    expect(calls).toBe(1);
  });
});
