import { describe, expect, it } from "vitest";
import { ConflictError, GoneError } from "./errors.ts";
import { commandRefusalOf, isSandboxRunnable, readRefusalOf, sandboxReadError } from "./sandbox-state.ts";

describe("the sandbox-state rule", () => {
  it("lets commands change a running or paused sandbox only", () => {
    expect(commandRefusalOf("RUNNING")).toBeNull();
    expect(commandRefusalOf("PAUSED")).toBeNull();
    expect(commandRefusalOf("STARTING")).toBe("starting");
    expect(commandRefusalOf("MISSING")).toBe("gone");
    expect(commandRefusalOf("ERROR")).toBe("gone");
  });

  it("lets a reader into a running sandbox's workspace only, and says why not otherwise", () => {
    expect(readRefusalOf("RUNNING")).toBeNull();
    expect(readRefusalOf("PAUSED")).toBe("paused");
    expect(readRefusalOf("STARTING")).toBe("starting");
    expect(readRefusalOf("MISSING")).toBe("gone");
    expect(readRefusalOf(null)).toBe("gone");
    const paused = sandboxReadError("paused", "0123abcd-0000-4000-8000-000000000000");
    expect(paused).toBeInstanceOf(ConflictError);
    expect(paused.message).toContain("POST /api/v1/sandboxes/0123abcd000040008000000000000000/resume");
    expect(sandboxReadError("gone", "x")).toBeInstanceOf(GoneError);
  });

  it("never runs the agent again in a gone sandbox; a paused or starting one may still run", () => {
    expect(isSandboxRunnable("MISSING")).toBe(false);
    expect(isSandboxRunnable("ERROR")).toBe(false);
    expect(isSandboxRunnable("PAUSED")).toBe(true);
    expect(isSandboxRunnable("STARTING")).toBe(true);
  });
});
