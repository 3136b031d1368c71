import { describe, expect, it } from "vitest";
import { isWithin } from "./read-file.ts";

describe("isWithin (a resolved path against the resolved workspace root)", () => {
  it("holds for the root and what is below it", () => {
    expect(isWithin("/workspace", "/workspace")).toBe(true);
    expect(isWithin("/workspace", "/workspace/project/README.md")).toBe(true);
    expect(isWithin("/workspace/", "/workspace/a")).toBe(true);
  });

  it("does not hold for a sibling that merely starts with the same letters, or anything above", () => {
    expect(isWithin("/workspace", "/workspace-other/secret")).toBe(false);
    expect(isWithin("/workspace", "/workspaces")).toBe(false);
    expect(isWithin("/workspace", "/etc/passwd")).toBe(false);
    expect(isWithin("/workspace", "/")).toBe(false);
  });
});
