import { describe, expect, it } from "vitest";
import { parseSkill, skillsTriggeredBy } from "./skills.ts";

describe("parseSkill", () => {
  it("reads name and triggers from front matter", () => {
    const s = parseSkill(
      ".openhands/skills/deploy.md",
      "---\nname: deployer\ntriggers:\n  - deploy\n  - ship it\n---\n# Deploy\nRun make deploy.\n",
    );
    expect(s).toEqual({
      name: "deployer",
      triggers: ["deploy", "ship it"],
      content: "# Deploy\nRun make deploy.",
      source: ".openhands/skills/deploy.md",
    });
  });

  it("without front matter: named after the file, always on", () => {
    expect(parseSkill("AGENTS.md", "Use pnpm.\n")).toEqual({
      name: "AGENTS",
      triggers: [],
      content: "Use pnpm.",
      source: "AGENTS.md",
    });
  });

  it("keeps a file whose front matter is not YAML as plain content", () => {
    const s = parseSkill(".openhands/microagents/x.md", "---\n: : [\n---\nbody");
    expect(s.name).toBe("x");
    expect(s.content).toContain("body");
  });

  it("accepts a single trigger string", () => {
    expect(parseSkill("a.md", "---\ntrigger: k8s\n---\nx").triggers).toEqual(["k8s"]);
  });
});

describe("skillsTriggeredBy", () => {
  it("matches triggers inside the message, case-insensitively", () => {
    const skills = [parseSkill("a.md", "---\ntriggers: [Deploy]\n---\nx"), parseSkill("b.md", "always")];
    expect(skillsTriggeredBy(skills, "please deploy now").map((s) => s.name)).toEqual(["a"]);
  });
});
