import { skillType } from "@tern/core";
import { conversationsRepository, eventsRepository } from "@tern/db";
import { type ScriptedLlmServer, startLlmServer, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

// Skills from every place OpenHands reads them: a repository on the test git server with
// each source, started through the real pipeline (worker process, sandbox) and run against the
// scripted LLM. What the model is sent decides where each skill went: always on (system prompt),
// listed (name and description only), triggered (added to the user message that says its keyword
// or `/name`, or to the result of the call that touched a file under a nested AGENTS.md), or read
// in full on demand (invoke_skill).

let h: StartHarness;
let llm: ScriptedLlmServer;

const FILES: Record<string, string> = {
  "AGENTS.md": "ROOT-AGENTS: run the tests.\n",
  "agent.md": "ROOT-AGENT-MD\n",
  "CLAUDE.md": "ROOT-CLAUDE\n",
  "GEMINI.md": "ROOT-GEMINI\n",
  ".cursorrules": "ROOT-CURSORRULES\n",
  "server/AGENTS.md": "NESTED-SERVER-RULE\n",
  "server/app.js": "console.log('server')\n",
  "web/index.js": "console.log('web')\n",
  ".agents/skills/pdf-tools/SKILL.md":
    "---\nname: pdf-tools\ndescription: Extract text from PDF files.\n---\nPDF-FULL-BODY: use scripts/extract.sh.\n",
  ".agents/skills/pdf-tools/references/guide.md": "PDF-REFERENCE-NOT-A-SKILL\n",
  ".agents/skills/lint.md": "---\ntriggers:\n  - lint\n---\n# Lint\nHow to lint.\nLINT-KEYWORD-BODY\n",
  ".openhands/skills/release.md":
    "---\nname: release\ninputs:\n  - name: VERSION\n    description: the version\n---\nHow to release.\nRELEASE-TASK-BODY\n",
  ".openhands/skills/deploy.md": "---\ntriggers: [deploy]\n---\nHow to deploy.\nDEPLOY-BODY\n",
  ".openhands/microagents/legacy.md": "LEGACY-MICROAGENT\n",
};

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/skillful", FILES);
  llm = await startLlmServer();
  await h.startWorker(llm.workerEnv("openai"));
}, 90_000);

afterAll(async () => {
  await h?.close();
  await llm?.close();
});

/** A request's messages of one role, as text (whatever shape the provider client gave their content). */
const messagesOf = (i: number, role: string): string[] => {
  const messages = (llm.requests[i]?.body.messages ?? []) as { role: string; content: unknown }[];
  return messages.filter((m) => m.role === role).map((m) => JSON.stringify(m.content));
};

describe("skills from every place OpenHands reads them", () => {
  it("each source reaches the model in its place: always on, listed, triggered, path rule, or on demand", async () => {
    llm.push(
      {
        toolCalls: [
          { name: "file_editor", arguments: { command: "view", path: "/workspace/skillful/web/index.js" } },
          { name: "file_editor", arguments: { command: "view", path: "/workspace/skillful/server/app.js" } },
          { name: "invoke_skill", arguments: { name: "pdf-tools" } },
        ],
      },
      { text: "All done." },
    );
    const user = await h.newUser();
    const taskId = await h.enqueueDirect(user.userId, {
      selected_repository: "acme/skillful",
      git_provider: "github",
      // A model of the Claude family (served by the scripted OpenAI-compatible server): CLAUDE.md is
      // for it, GEMINI.md is not.
      llm_model: "claude-scripted",
      initial_message: {
        role: "user",
        content: [{ type: "text", text: "Please LINT the code, then do /release for 1.2." }],
        run: true,
      },
    });
    const { task } = await h.waitForTask(taskId, 90_000);
    expect(task.detail).toBeNull();
    const conversationId = task.appConversationId!;
    await waitFor(
      async () => (await conversationsRepository(h.database.db).get(conversationId))?.executionStatus === "finished",
      { what: "the agent run to finish", timeoutMs: 120_000 },
    );
    expect(llm.requests).toHaveLength(2);

    // Loaded: every source, each once, in its kind; the AgentSkills folder's reference file is not a skill.
    const conversation = await conversationsRepository(h.database.db).get(conversationId);
    const loaded = Object.fromEntries((conversation?.skills ?? []).map((s) => [s.name, [skillType(s), s.source]]));
    expect(loaded).toEqual({
      agents: ["repo", "AGENTS.md"],
      agent: ["repo", "agent.md"],
      claude: ["repo", "CLAUDE.md"],
      gemini: ["repo", "GEMINI.md"],
      cursorrules: ["repo", ".cursorrules"],
      "agents:server": ["knowledge", "server/AGENTS.md"],
      "pdf-tools": ["agentskills", ".agents/skills/pdf-tools/SKILL.md"],
      lint: ["knowledge", ".agents/skills/lint.md"],
      release: ["knowledge", ".openhands/skills/release.md"],
      deploy: ["knowledge", ".openhands/skills/deploy.md"],
      legacy: ["repo", ".openhands/microagents/legacy.md"],
    });

    // Always on: in the system prompt, whole. Listed: name and description, not the body.
    const [system] = messagesOf(0, "system");
    for (const always of ["ROOT-AGENTS", "ROOT-AGENT-MD", "ROOT-CLAUDE", "ROOT-CURSORRULES", "LEGACY-MICROAGENT"]) {
      expect(system).toContain(always);
    }
    expect(system).not.toContain("ROOT-GEMINI");
    for (const name of ["pdf-tools", "lint", "release", "deploy"]) expect(system).toContain(`<name>${name}</name>`);
    expect(system).toContain("Extract text from PDF files.");
    // Without a description, a skill is listed with its first line of prose (as OpenHands lists it).
    expect(system).toContain("<description>How to lint.</description>");
    for (const body of [
      "PDF-FULL-BODY",
      "LINT-KEYWORD-BODY",
      "RELEASE-TASK-BODY",
      "DEPLOY-BODY",
      "NESTED-SERVER-RULE",
    ]) {
      expect(system).not.toContain(body);
    }
    expect(system).not.toContain("agents:server");
    expect(JSON.stringify(llm.requests)).not.toContain("PDF-REFERENCE-NOT-A-SKILL");

    // Triggered by the user message: its keyword (any case) and its /name; the unsaid one is not.
    const [firstUser] = messagesOf(0, "user");
    expect(firstUser).toContain("LINT-KEYWORD-BODY");
    expect(firstUser).toContain("RELEASE-TASK-BODY");
    expect(firstUser).not.toContain("DEPLOY-BODY");
    const stored = (await eventsRepository(h.database.db).listAll(conversationId)).find(
      (e) => e.kind === "MessageEvent" && e.source === "user",
    );
    expect(stored?.payload).toMatchObject({ activated_skills: ["lint", "release"] });

    // The path rule comes with the result of the call that touched server/, not the one under web/;
    // the listed skill is read in full on demand.
    const results = messagesOf(1, "tool");
    expect(results).toHaveLength(3);
    expect(results[0]).toContain("console.log('web')");
    expect(results[0]).not.toContain("NESTED-SERVER-RULE");
    expect(results[1]).toContain("console.log('server')");
    expect(results[1]).toContain("NESTED-SERVER-RULE");
    expect(results[2]).toContain("PDF-FULL-BODY");
    expect(results[2]).toContain("/workspace/skillful/.agents/skills/pdf-tools");
  }, 240_000);
});
