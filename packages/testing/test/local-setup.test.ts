import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../src/processes.ts";
import { scaled } from "../src/time-scale.ts";

describe("scripts/lib/ensure-*.sh", () => {
  // scripts/test.sh ran them before the tests: everything is in place, so a second run does nothing.
  it("is quiet and does no work when everything is already there", () => {
    for (const script of ["ensure-pnpm.sh", "ensure-all.sh"]) {
      const res = spawnSync("bash", [`scripts/lib/${script}`], {
        cwd: repoRoot,
        encoding: "utf8",
        timeout: scaled(60_000),
      });
      expect(res.status, `${script}: ${res.stderr}`).toBe(0);
      expect(res.stderr, script).toBe("");
      expect(res.stdout, script).toBe("");
    }
  });
});
