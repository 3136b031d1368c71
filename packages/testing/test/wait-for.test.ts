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
