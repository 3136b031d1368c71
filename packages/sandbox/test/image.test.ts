import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const image = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const run = (...cmd: string[]) => execFileSync("docker", ["run", "--rm", image, ...cmd], { encoding: "utf8" }).trim();

describe("the sandbox image", () => {
  it("has git and runs as the non-root user in /workspace", () => {
    expect(run("git", "--version")).toMatch(/^git version 2\./);
    expect(run("id", "-u")).toBe("1000");
    expect(run("whoami")).toBe("agent");
    expect(run("pwd")).toBe("/workspace");
  });

  it("has the tools setup scripts expect", () => {
    expect(run("sh", "-c", "for c in bash curl python3 make; do command -v $c; done")).toMatch(
      /bash[\s\S]*curl[\s\S]*python3[\s\S]*make/,
    );
  });
});
