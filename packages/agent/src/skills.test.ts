import { newEvent, type Skill, type StoredEvent, saysKeyword, skillsTriggeredBy } from "@tern/core";
import { describe, expect, it } from "vitest";
import { buildHistory } from "./history.ts";
import { invokedSkillText, pathMatchesGlob } from "./skills.ts";

const skills: Skill[] = [
  { name: "agents", triggers: [], content: "ALWAYS", source: "AGENTS.md" },
  { name: "git-help", triggers: ["git"], content: "GIT-SKILL", source: ".openhands/skills/git-help.md" },
  { name: "release", triggers: ["/release"], content: "RELEASE-TASK", source: ".openhands/skills/release.md" },
  {
    name: "pdf-tools",
    triggers: [],
    content: "PDF-FULL",
    source: ".agents/skills/pdf-tools/SKILL.md",
    format: "agentskills",
    description: "PDFs",
  },
  { name: "agents:server", triggers: [], content: "SERVER-RULE", source: "server/AGENTS.md", paths: ["server/**"] },
  {
    name: "hidden",
    triggers: ["secretword"],
    content: "HIDDEN",
    source: ".openhands/skills/hidden.md",
    disableModelInvocation: true,
  },
];

let seq = 0;
const stored = (d: { kind: string; source: string; payload: unknown }): StoredEvent =>
  ({ ...d, id: `e${++seq}`, conversationId: "c", seq, timestamp: "2026-01-01T00:00:00.000000Z" }) as StoredEvent;
const user = (text: string) => stored(newEvent.userMessage([{ type: "text", text }]));
const call = (id: string, name: string, action: Record<string, unknown>, response = id) => [
  stored(
    newEvent.action({
      tool_name: name,
      tool_call_id: id,
      thought: [],
      action: { kind: "X", ...action },
      tool_call: { id, name, arguments: JSON.stringify(action) },
      llm_response_id: response,
      history_seq: 1,
    }),
  ),
  stored(
    newEvent.observation({
      tool_name: name,
      tool_call_id: id,
      action_id: `a-${id}`,
      observation: { kind: "O", content: [{ type: "text", text: `result ${id}` }] },
    }),
  ),
];

describe("keyword and task triggers", () => {
  it("match whole words, ignoring case: `git` is not in `github`, `/release` is in `do /release now`", () => {
    expect(saysKeyword("Use GIT please", "git")).toBe(true);
    expect(saysKeyword("open github", "git")).toBe(false);
    expect(saysKeyword("do /release now", "/release")).toBe(true);
    expect(saysKeyword("release it", "/release")).toBe(false);
    expect(skillsTriggeredBy(skills, "git and /release").map((m) => m.skill.name)).toEqual(["git-help", "release"]);
  });
});

describe("path globs", () => {
  it("follow gitignore: ** crosses folders, * does not, a bare pattern matches at any depth", () => {
    expect(pathMatchesGlob("server/a/b.ts", "server/**")).toBe(true);
    expect(pathMatchesGlob("serverx/a.ts", "server/**")).toBe(false);
    expect(pathMatchesGlob("src/a/b.ts", "src/*.ts")).toBe(false);
    expect(pathMatchesGlob("deep/x.sql", "*.sql")).toBe(true);
  });
});

describe("the history a run sends", () => {
  it("adds a triggered skill to the first user message that says its keyword, once", () => {
    const h = buildHistory([user("fix the git hook"), user("more git")], skills);
    expect(h.messages[0]?.text).toContain("GIT-SKILL");
    expect(h.messages[1]?.text).not.toContain("GIT-SKILL");
    expect(h.messages[0]?.text).not.toContain("RELEASE-TASK");
  });

  it("adds a path rule to the result of the first call that touches a file under its folder, once", () => {
    const events = [
      user("look around"),
      ...call("c1", "file_editor", { command: "view", path: "/workspace/w/README.md" }),
      ...call("c2", "file_editor", { command: "view", path: "/workspace/w/server/app.js" }),
      ...call("c3", "file_editor", { command: "view", path: "server/other.js" }),
    ];
    const tool = buildHistory(events, skills, { dir: "/workspace/w" }).messages.filter((m) => m.role === "tool");
    expect(tool.map((m) => m.text.includes("SERVER-RULE"))).toEqual([false, true, false]);
  });
});

describe("invoke_skill", () => {
  it("returns a listed skill in full with its folder, and names the skills when asked for an unknown one", () => {
    const r = invokedSkillText(skills, "pdf-tools", "/workspace/w");
    expect(r).toEqual({ ok: true, text: expect.stringContaining("PDF-FULL") });
    expect(r.text).toContain("/workspace/w/.agents/skills/pdf-tools");
    expect(invokedSkillText(skills, "hidden", "/workspace/w").ok).toBe(false);
    const bad = invokedSkillText(skills, "nope", "/workspace/w");
    expect(bad.ok).toBe(false);
    expect(bad.text).toContain("git-help, release, pdf-tools");
  });
});
