import { describe, expect, it } from "vitest";
import { parseSkill, skillFromFile, skillsFromFiles } from "./skills.ts";

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
    expect(parseSkill(".openhands/skills/style.md", "Use pnpm.\n")).toEqual({
      name: "style",
      triggers: [],
      content: "Use pnpm.",
      source: ".openhands/skills/style.md",
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

  it("a task skill (inputs) is triggered by /name too", () => {
    const s = parseSkill("a.md", "---\nname: release\ninputs:\n  - name: VERSION\n---\nRelease the given VERSION.");
    expect(s.triggers).toEqual(["/release"]);
    expect(s.content).toContain("ask for them");
  });

  it("reads disable-model-invocation", () => {
    expect(parseSkill("a.md", "---\ntriggers: [x]\ndisable-model-invocation: true\n---\nb")).toMatchObject({
      triggers: ["x"],
      disableModelInvocation: true,
    });
  });

  it("a path rule (paths) ignores its triggers", () => {
    const s = parseSkill("a.md", "---\npaths: 'src/**, *.sql'\ntriggers: [x]\n---\nrule");
    expect(s).toMatchObject({ triggers: [], paths: ["src/**", "*.sql"] });
  });
});

describe("skillFromFile", () => {
  it("another tool's file at the root is always on under OpenHands' name, front matter or not", () => {
    expect(skillFromFile("third", "CLAUDE.md", "---\ntriggers: [x]\n---\nBe brief.")).toEqual({
      name: "claude",
      triggers: [],
      content: "Be brief.",
      source: "CLAUDE.md",
    });
    expect(skillFromFile("third", ".cursorrules", "rules")?.name).toBe("cursorrules");
  });

  it("a nested AGENTS.md is a path rule for its folder", () => {
    expect(skillFromFile("nested", "server/api/AGENTS.md", "Use 4 spaces.")).toEqual({
      name: "agents:server/api",
      triggers: [],
      content: "Use 4 spaces.",
      source: "server/api/AGENTS.md",
      paths: ["server/api/**"],
    });
  });

  it("a SKILL.md folder is an AgentSkills skill named after its folder, with its description", () => {
    expect(
      skillFromFile("skillmd", ".agents/skills/pdf-tools/SKILL.md", "---\ndescription: Read PDFs.\n---\nSteps."),
    ).toEqual({
      name: "pdf-tools",
      triggers: [],
      content: "Steps.",
      source: ".agents/skills/pdf-tools/SKILL.md",
      format: "agentskills",
      description: "Read PDFs.",
    });
  });

  it("a markdown file under a skills folder is named by its path there", () => {
    expect(skillFromFile("md:.openhands/skills", ".openhands/skills/ops/deploy.md", "x")?.name).toBe("ops/deploy");
  });
});

describe("skillsFromFiles", () => {
  it("keeps the first skill of each name (OpenHands' precedence)", () => {
    const skills = skillsFromFiles([
      { kind: "md:.agents/skills", path: ".agents/skills/lint.md", text: "first" },
      { kind: "md:.openhands/skills", path: ".openhands/skills/lint.md", text: "second" },
    ]);
    expect(skills.map((s) => s.content)).toEqual(["first"]);
  });
});
