import { describe, expect, it } from "vitest";
import type { SandboxInfo, SandboxState } from "./driver.ts";
import { sandboxFaultOf } from "./fault.ts";

const driverSeeing = (seen: SandboxState | null | Error) => ({
  inspect: async (ref: string): Promise<SandboxInfo | null> => {
    if (seen instanceof Error) throw seen;
    return seen === null ? null : { ref, name: ref, state: seen, labels: {}, createdAt: new Date(0).toISOString() };
  },
});

describe("sandboxFaultOf", () => {
  it.each([
    [null, "gone"],
    ["failed", "gone"],
    ["paused", "paused"],
    ["stopped", "not-running"],
    ["starting", "not-running"],
    ["running", "passing"],
  ] as const)("a sandbox the driver sees as %s is %s", async (seen, fault) => {
    expect(await sandboxFaultOf(driverSeeing(seen), "sbx")).toBe(fault);
  });

  it("takes a sandbox it cannot inspect as a passing fault, not as gone", async () => {
    expect(await sandboxFaultOf(driverSeeing(new Error("engine unreachable")), "sbx")).toBe("passing");
  });
});
