import type { Skill } from "@tern/core";
import { describe, expect, it } from "vitest";
import { buildSystemPrompt, estimateTokens, SYSTEM_PROMPT_TOKEN_BUDGET } from "./system-prompt.ts";

const base = { workspaceDir: "/workspace/widgets", repository: "acme/widgets", skills: [] };

describe("the system prompt", () => {
  it(`stays under its budget of ${SYSTEM_PROMPT_TOKEN_BUDGET} tokens (chars/4) without the repository's skills`, () => {
    const tokens = estimateTokens(buildSystemPrompt(base));
    expect(tokens).toBeLessThanOrEqual(SYSTEM_PROMPT_TOKEN_BUDGET);
    // A prompt gutted by mistake would pass the budget: it still says something in each section.
    expect(tokens).toBeGreaterThan(SYSTEM_PROMPT_TOKEN_BUDGET / 2);
  });

  it("covers every section the issue names", () => {
    const prompt = buildSystemPrompt(base);
    for (const tag of [
      "ROLE",
      "TOOLS",
      "WORKFLOW",
      "EFFICIENCY",
      "FILES",
      "CODE_QUALITY",
      "VERSION_CONTROL",
      "TROUBLESHOOTING",
      "SECURITY",
      "ENVIRONMENT",
      "PROCESSES",
      "PULL_REQUESTS",
      "MEMORY",
    ]) {
      expect(prompt).toContain(`<${tag}>`);
    }
    expect(prompt).toContain("/workspace/widgets");
    expect(prompt).toContain("acme/widgets");
    for (const phrase of [
      "Never force-push",
      "`git_push`",
      "`create_pull_request`",
      "kill -9",
      "environment variables",
      "ONE pull request",
      "`AGENTS.md` at the repository's root is its memory",
      "add it to `AGENTS.md`",
    ]) {
      expect(prompt).toContain(phrase);
    }
    for (const tool of ["terminal", "file_editor", "task_tracker", "think", "finish", "invoke_skill"]) {
      expect(prompt).toContain(`\`${tool}\``);
    }
  });

  it("names the user's secrets, never their values, and says the date last; neither when not given", () => {
    const prompt = buildSystemPrompt({
      ...base,
      secrets: [{ name: "GITHUB_TOKEN", description: "push to\n acme" }, { name: "API_KEY" }],
      now: new Date("2026-12-06T03:55:00Z"),
    });
    expect(prompt).toContain("<CUSTOM_SECRETS>");
    expect(prompt).toContain("* `$GITHUB_TOKEN`: push to acme\n* `$API_KEY`\n");
    expect(
      prompt.endsWith(
        "<CURRENT_DATETIME>\nThe current date and time is 2026-12-06T03:55:00.000Z (UTC).\n</CURRENT_DATETIME>",
      ),
    ).toBe(true);
    const plain = buildSystemPrompt(base);
    expect(plain).not.toContain("CUSTOM_SECRETS");
    expect(plain).not.toContain("CURRENT_DATETIME");
  });

  it("an empty workspace says so", () => {
    expect(buildSystemPrompt({ ...base, repository: null })).toContain("an empty git repository");
  });

  it("puts always-on skills in whole, lists the others by name and description, and leaves path rules out", () => {
    const skills: Skill[] = [
      { name: "agents", triggers: [], content: "Always run the tests.", source: "AGENTS.md" },
      { name: "deployer", triggers: ["deploy"], content: "Run `make deploy`.", source: ".openhands/skills/deploy.md" },
      {
        name: "pdf-tools",
        triggers: [],
        content: "The full PDF steps.",
        source: ".agents/skills/pdf-tools/SKILL.md",
        format: "agentskills",
        description: "Extract text from <PDF> files.",
      },
      {
        name: "agents:server",
        triggers: [],
        content: "Server rule.",
        source: "server/AGENTS.md",
        paths: ["server/**"],
      },
      { name: "quiet", triggers: ["q"], content: "Q", source: "q.md", disableModelInvocation: true },
    ];
    const prompt = buildSystemPrompt({ ...base, skills });
    expect(prompt).toContain("Always run the tests.");
    expect(prompt).toContain("<name>deployer</name>");
    expect(prompt).toContain("<description>Run `make deploy`.</description>");
    expect(prompt).toContain("<name>pdf-tools</name>");
    expect(prompt).toContain("Extract text from &lt;PDF&gt; files.");
    expect(prompt).not.toContain("The full PDF steps.");
    expect(prompt).not.toContain("Server rule.");
    expect(prompt).not.toContain("agents:server");
    expect(prompt).not.toContain("<name>quiet</name>");
  });

  it("gives CLAUDE.md to Claude models and GEMINI.md to Gemini ones only, and both to a model it cannot place", () => {
    const skills: Skill[] = [
      { name: "claude", triggers: [], content: "CLAUDE-ONLY", source: "CLAUDE.md" },
      { name: "gemini", triggers: [], content: "GEMINI-ONLY", source: "GEMINI.md" },
    ];
    const forModel = (llmModel: string | null) => buildSystemPrompt({ ...base, skills, llmModel });
    expect(forModel("anthropic/claude-sonnet-4-5")).toContain("CLAUDE-ONLY");
    expect(forModel("anthropic/claude-sonnet-4-5")).not.toContain("GEMINI-ONLY");
    expect(forModel("gemini-2.5-pro")).not.toContain("CLAUDE-ONLY");
    expect(forModel("gpt-4o")).not.toContain("GEMINI-ONLY");
    expect(forModel("scripted")).toContain("CLAUDE-ONLY");
    expect(forModel(null)).toContain("GEMINI-ONLY");
  });
});
