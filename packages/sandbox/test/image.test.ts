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
    const tools = [
      ...["bash", "curl", "python3", "make", "gcc", "g++", "pip3", "node", "npm", "node-gyp", "git-lfs", "jq"],
      ...["rg", "unzip", "zip", "file", "less", "ssh", "sudo", "tmux"],
    ];
    const found = run("bash", "-c", `for c in ${tools.join(" ")}; do command -v $c >/dev/null && echo $c; done`);
    expect(found.split("\n")).toEqual(tools);
    // Headers for C extensions and native addons.
    expect(run("ls", "/usr/include/python3.11/Python.h", "/usr/include/node/node_api.h")).toBe(
      "/usr/include/node/node_api.h\n/usr/include/python3.11/Python.h",
    );
  });

  it("keeps no setuid or setgid program but sudo, and gives its user sudo without a password", () => {
    expect(run("bash", "-c", "find / -xdev -type f -perm /6000 2>/dev/null; true")).toBe("/usr/bin/sudo");
    const sudoers = execFileSync("docker", ["run", "--rm", "--user", "0", image, "cat", "/etc/sudoers.d/agent"], {
      encoding: "utf8",
    });
    expect(sudoers.trim()).toBe("agent ALL=(ALL:ALL) NOPASSWD: ALL");
  });
});
