import { RepositoryFaultError } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { testSecretBox, fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import type { StartContext } from "../src/pipeline/context.ts";
import { setUpSkills } from "../src/pipeline/set-up-skills.ts";
import { runJanitor } from "../src/processors/janitor.ts";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

/**
 * The worker's side of the tenancy limits, with real Postgres, Redis, sandboxes and the scripted
 * LLM: idle sandboxes paused and old ones removed by the janitor, the agent-run job resuming an
 * idle-paused sandbox, and the cap on a repository's skills. (The bounded history and the event
 * cap are the loop's: packages/agent/test/history-window.test.ts.)
 */
const SKILLS_BYTES = 2048;

let fx: AgentFixture;
let deps: WorkerDeps;

beforeAll(async () => {
  const env = {
    MAX_SKILLS_BYTES: String(SKILLS_BYTES),
    SANDBOX_IDLE_PAUSE: "1800",
    SANDBOX_MAX_AGE: "86400",
  };
  fx = await createAgentFixture({ env });
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
});

afterAll(async () => {
  await fx?.close();
});

describe("idle and old sandboxes", () => {
  const sandboxOf = async (conversationId: string) => {
    const c = await fx.conversation(conversationId);
    const row = await sandboxesRepository(fx.database.db).get(c.sandboxId ?? "");
    if (!row) throw new Error("no sandbox row");
    return { conversation: c, row, info: await fx.sandboxes.inspect(row.ref ?? row.name) };
  };
  const idleFor = (conversationId: string, seconds: number) =>
    fx.database.db
      .updateTable("conversations")
      .set({ last_event_at: new Date(Date.now() - seconds * 1000) })
      .where("id", "=", conversationId)
      .execute();

  it("pauses a sandbox idle past SANDBOX_IDLE_PAUSE; a follow-up resumes it; SANDBOX_MAX_AGE removes it", async () => {
    const idle = await fx.newConversation({});
    const busy = await fx.newConversation({});
    await idleFor(idle.conversationId, 3600);
    // The other one was active a minute ago.
    await idleFor(busy.conversationId, 60);

    const report = await runJanitor(deps);
    let idleNow = await sandboxOf(idle.conversationId);
    expect(report.pausedSandboxes).toEqual([idleNow.row.id]);
    expect(idleNow.info?.state).toBe("paused");
    expect(idleNow.row.status).toBe("PAUSED");
    expect(idleNow.row.idlePausedAt).not.toBeNull();
    expect(idleNow.conversation.sandboxStatus).toBe("PAUSED");
    expect((await sandboxOf(busy.conversationId)).info?.state).toBe("running");

    // A follow-up: the run resumes the sandbox before its first tool call.
    await fx.sayToAgent(idle.conversationId, "Still there?");
    fx.llm.push({ toolCalls: [{ name: "terminal", arguments: { command: "echo RESUMED-OK" } }] }, { text: "Yes." });
    const { conversation } = await fx.run(idle.conversationId, "openai");
    expect(conversation.executionStatus).toBe("finished");
    const observation = (await fx.events(idle.conversationId)).find((e) => e.kind === "ObservationEvent");
    expect(JSON.stringify(observation?.payload)).toContain("RESUMED-OK");
    idleNow = await sandboxOf(idle.conversationId);
    expect(idleNow.info?.state).toBe("running");
    expect(idleNow.row).toMatchObject({ status: "RUNNING", idlePausedAt: null });

    // Old: past SANDBOX_MAX_AGE the sandbox goes, unless a run works in it.
    const old = new Date(Date.now() - 2 * 86_400_000);
    const busyRow = (await sandboxOf(busy.conversationId)).row;
    await fx.database.db
      .updateTable("sandboxes")
      .set({ created_at: old })
      .where("id", "in", [idleNow.row.id, busyRow.id])
      .execute();
    await fx.database.db
      .updateTable("conversations")
      .set({ active_run_id: "00000000-0000-4000-8000-000000000001" })
      .where("id", "=", busy.conversationId)
      .execute();
    const second = await runJanitor(deps);
    idleNow = await sandboxOf(idle.conversationId);
    expect(second.agedSandboxes).toEqual([idleNow.row.id]);
    expect(idleNow.info).toBeNull();
    expect(idleNow.row.status).toBe("MISSING");
    expect(idleNow.conversation.sandboxStatus).toBe("MISSING");
    const busyNow = await sandboxOf(busy.conversationId);
    expect(busyNow.row.status).toBe("RUNNING");
    expect(busyNow.info?.state).toBe("running");
    await fx.database.db
      .updateTable("conversations")
      .set({ active_run_id: null })
      .where("id", "=", busy.conversationId)
      .execute();
  });

  it("leaves a sandbox alone while a run holds its conversation, however idle", async () => {
    const held = await fx.newConversation({});
    await idleFor(held.conversationId, 3600);
    await fx.database.db
      .updateTable("conversations")
      .set({ active_run_id: "00000000-0000-4000-8000-000000000002" })
      .where("id", "=", held.conversationId)
      .execute();
    const report = await runJanitor(deps);
    const { row, info } = await sandboxOf(held.conversationId);
    expect(report.pausedSandboxes).not.toContain(row.id);
    expect(info?.state).toBe("running");
  });
});

describe("MAX_SKILLS_BYTES", () => {
  const skillsOf = async (files: Record<string, string>) => {
    const { sandboxRef } = await fx.newConversation({ files });
    const ctx = { deps, log: fx.logger } as unknown as StartContext;
    return setUpSkills(
      ctx,
      { sandboxId: "", ref: sandboxRef, name: "" },
      {
        dir: workspaceDir,
        repository: { fullName: "acme/project", name: "project", branch: null, provider: "github" },
      },
    );
  };

  it("loads skills that fit together", async () => {
    const skills = await skillsOf({ "AGENTS.md": "Use pnpm.\n", ".openhands/skills/a.md": "a".repeat(1000) });
    expect(skills.map((s) => s.source).sort()).toEqual([".openhands/skills/a.md", "AGENTS.md"]);
  });

  it("fails the start as the repository's fault when they do not, naming the largest files", async () => {
    const refused = skillsOf({
      "AGENTS.md": "Use pnpm.\n",
      ".openhands/skills/a.md": "a".repeat(1500),
      ".openhands/microagents/b.md": "b".repeat(1500),
    });
    await expect(refused).rejects.toBeInstanceOf(RepositoryFaultError);
    await expect(refused).rejects.toThrow(
      /skills are 3 KiB in all, more than MAX_SKILLS_BYTES allows \(2 KiB\).*\.openhands\/(skills\/a|microagents\/b)\.md/,
    );
  });
});
