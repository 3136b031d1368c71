import { skillType } from "@tern/core";
import { testSecretBox, fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import type { StartContext } from "../src/pipeline/context.ts";
import { setUpSkills } from "../src/pipeline/set-up-skills.ts";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

// SETTING_UP_SKILLS in a real sandbox, with a workspace that is a folder of its git repository:
// skills are read at the workspace and at the git root (the workspace's win a name both have),
// nested instruction files only under the workspace, as OpenHands reads them.

let fx: AgentFixture;
let deps: WorkerDeps;

beforeAll(async () => {
  fx = await createAgentFixture();
  deps = {
    config: loadWorkerConfig(fx.env("openai")),
    db: fx.database.db,
    redis: fx.redis,
    queues: fx.queues,
    sandboxes: fx.sandboxes,
    engineId: null,
    pool: null,
    logger: fx.logger,
    secretBox: testSecretBox(),
  };
}, 60_000);

afterAll(async () => {
  await fx?.close();
});

describe("skills at the workspace and at the git root", () => {
  it("reads both, the workspace's first; nested files only under the workspace", async () => {
    const { sandboxRef } = await fx.newConversation({
      files: {
        "AGENTS.md": "ROOT-AGENTS",
        "CLAUDE.md": "ROOT-CLAUDE",
        ".openhands/skills/shared.md": "ROOT-SHARED",
        ".agents/skills/root-only.md": "---\ntriggers: [rooty]\n---\nROOT-ONLY",
        "other/AGENTS.md": "OUTSIDE-THE-WORKSPACE",
        "pkg/AGENTS.md": "PKG-AGENTS",
        "pkg/.openhands/skills/shared.md": "PKG-SHARED",
        "pkg/api/AGENTS.md": "PKG-API-RULE",
        "pkg/README.md": "not a skill",
      },
    });
    const skills = await setUpSkills(
      { deps, log: fx.logger } as unknown as StartContext,
      { sandboxId: "", ref: sandboxRef, name: "" },
      {
        dir: `${workspaceDir}/pkg`,
        repository: { fullName: "acme/project", name: "project", branch: null, provider: "github" },
      },
    );
    const byName = Object.fromEntries(skills.map((s) => [s.name, [skillType(s), s.source, s.content]]));
    expect(byName).toEqual({
      agents: ["repo", "AGENTS.md", "PKG-AGENTS"],
      claude: ["repo", "../CLAUDE.md", "ROOT-CLAUDE"],
      "agents:api": ["knowledge", "api/AGENTS.md", "PKG-API-RULE"],
      shared: ["repo", ".openhands/skills/shared.md", "PKG-SHARED"],
      "root-only": ["knowledge", "../.agents/skills/root-only.md", "ROOT-ONLY"],
    });
    expect(skills.find((s) => s.name === "agents:api")?.paths).toEqual(["api/**"]);
  }, 60_000);
});
