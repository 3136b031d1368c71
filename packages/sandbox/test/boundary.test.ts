import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));

describe("the sandbox boundary", () => {
  it("nothing outside packages/sandbox names dockerode: the worker, tests and bench see only the driver", () => {
    let found = "";
    try {
      found = execFileSync("git", ["grep", "--untracked", "-l", "dockerode", "--", "*.ts", ":!packages/sandbox/**"], {
        cwd: repoRoot,
        encoding: "utf8",
      });
    } catch (err) {
      // git grep exits 1 when nothing matches.
      if ((err as { status?: number }).status !== 1) throw err;
    }
    expect(found.split("\n").filter(Boolean)).toEqual([]);
  });
});
