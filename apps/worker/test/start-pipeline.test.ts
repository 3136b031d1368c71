import { toHexId } from "@tern/core";
import { conversationsRepository, eventsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { enqueue } from "@tern/queue";
import { dockerEngineFromEnv } from "@tern/sandbox";
import { createDockerProbe } from "@tern/sandbox/docker";
import { type ServiceProcess, testSandboxNetworkName, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allStages, createStartHarness, isInOrder, type StartHarness, uuidOf } from "./start-harness.ts";

let h: StartHarness;
/** The stages' own keys (the worker keeps `db:STAGE` and `engine:STAGE` timings beside them). */
const stageKeys = (durations: Record<string, number>) =>
  Object.keys(durations)
    .filter((k) => !k.includes(":"))
    .sort();
let api: ServiceProcess;
let worker: ServiceProcess;
let key: string;

const SETUP = `#!/bin/bash
set -e
echo "setting up on $(git rev-parse --abbrev-ref HEAD) as $(id -un)"
echo "built" > setup-output.txt
# A hook that was there before ours: kept and chained.
printf '#!/bin/sh\\necho local-hook-ran > "$(git rev-parse --show-toplevel)/.local-hook-ran"\\n' > .git/hooks/pre-commit
chmod +x .git/hooks/pre-commit
sleep 0.5
# Left behind, as a hostile script would leave a watcher: ended before the agent starts.
sleep 1000 &
( setsid sleep 1001 >/dev/null 2>&1 & )
echo "setup done"
`;

const PRE_COMMIT = `#!/bin/bash
echo openhands-hook-ran > "$(git rev-parse --show-toplevel)/.openhands-hook-ran"
[ ! -f BLOCK_COMMIT ]
`;

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo(
    "acme/widgets",
    { "src/index.js": "console.log('main')\n" },
    {
      branches: {
        "feature/tools": {
          "src/feature.js": "console.log('feature')\n",
          ".openhands/setup.sh": SETUP,
          ".openhands/pre-commit.sh": PRE_COMMIT,
          ".openhands/skills/deploy.md": "---\nname: deployer\ntriggers:\n  - deploy\n---\nRun `make deploy`.\n",
          ".openhands/microagents/style.md": "Use two spaces.\n",
          "AGENTS.md": "---\nname: agents\n---\nAlways run the tests.\n",
        },
      },
    },
  );
  [api, worker] = await Promise.all([h.startApi(), h.startWorker()]);
  key = (await h.newUser()).key;
});

afterAll(async () => {
  await h?.close();
  // Nothing of this file's namespace survives it.
  expect(await h.sandboxes()).toEqual([]);
});

describe("the start pipeline, end to end (API, worker, Docker, git)", () => {
  it("takes a repository start through every stage, in order, into a prepared sandbox", async () => {
    const res = await h.post(api, key, {
      title: "widgets",
      selected_repository: "acme/widgets",
      selected_branch: "feature/tools",
      git_provider: "github",
      initial_message: { role: "user", content: [{ type: "text", text: "please deploy it" }], run: false },
    });
    expect(res.status).toBe(200);
    const created = (await res.json()) as { id: string };
    const { task, seen } = await h.waitForTask(created.id);
    expect(task.detail).toBeNull();
    expect(task.status).toBe("READY");
    expect(isInOrder(seen, allStages)).toBe(true);
    // The half-second setup script is long enough to be seen by the poll.
    expect(seen).toContain("RUNNING_SETUP_SCRIPT");
    expect(stageKeys(task.stageDurations)).toEqual(allStages.slice(1, -1).sort());

    // The task, its sandbox row and the container agree.
    const sandbox = await sandboxesRepository(h.database.db).findByTask(task.id);
    expect(sandbox).toMatchObject({ status: "RUNNING", name: `tern-task-${toHexId(task.id)}` });
    expect(task.sandboxId).toBe(sandbox?.id);
    const containers = await h.sandboxes();
    expect(containers.map((c) => c.name)).toEqual([sandbox?.name]);
    expect(containers[0]?.ref).toBe(sandbox?.ref);
    expect(containers[0]?.labels).toMatchObject({
      "tern.sandbox": "1",
      "tern.namespace": h.prefix,
      "tern.task_id": task.id,
      "tern.conversation_id": task.appConversationId,
      "tern.sandbox_id": sandbox?.id,
    });
    const name = sandbox!.name;

    // Hardened as configured: no capabilities, no privilege gain, limits, our network, no ports.
    const inspected = await createDockerProbe(dockerEngineFromEnv(process.env)).inspect(name);
    expect(inspected.HostConfig).toMatchObject({
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges:true"],
      Memory: 512 * 1024 * 1024,
      PidsLimit: 512,
      NetworkMode: testSandboxNetworkName(),
    });
    expect(inspected.HostConfig.CapAdd ?? []).toEqual([]);
    expect(inspected.HostConfig.Privileged).toBe(false);
    expect(inspected.Config.User).toBe("1000:1000");
    expect(inspected.HostConfig.Ulimits).toEqual([
      { Name: "nofile", Soft: 4096, Hard: 4096 },
      { Name: "nproc", Soft: 8192, Hard: 8192 },
    ]);
    // Nothing setup.sh left running survived it.
    const left = await h.execIn(name, "ps -eo args= | grep -c '^sleep 100[01]$'; true");
    expect(left.output).toBe("0\n");
    expect(inspected.NetworkSettings.Ports ?? {}).toEqual({});
    const whoami = await h.execIn(name, "id -un; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status");
    expect(whoami.output).toMatch(/^agent\nCapEff:\s+0+\nNoNewPrivs:\s+1\n$/);

    // The clone: the right branch, shallow, and no token anywhere in its config.
    const clone = await h.execIn(
      name,
      "cd /workspace/widgets && git rev-parse --abbrev-ref HEAD && git rev-list --count HEAD && cat src/feature.js && cat .git/config",
    );
    expect(clone.exitCode).toBe(0);
    expect(clone.output).toMatch(/^feature\/tools\n1\nconsole.log\('feature'\)\n/);
    expect(clone.output).toContain(`url = ${h.git.url}/acme/widgets.git`);
    expect(clone.output).not.toContain(h.gitToken);
    expect(clone.output).not.toMatch(/extraheader|authorization/i);
    const grep = await h.execIn(name, `grep -rl '${h.gitToken}' /workspace /home/agent 2>/dev/null; echo end`);
    expect(grep.output).toBe("end\n");
    expect(h.git.requests.some((r) => r.includes("unauthorized"))).toBe(false);

    // setup.sh ran as the sandbox user in the repository; its output is kept.
    const built = await h.execIn(
      name,
      "cat /workspace/widgets/setup-output.txt && stat -c %U /workspace/widgets/setup-output.txt",
    );
    expect(built.output).toBe("built\nagent\n");
    const setupOutput = await startTasksRepository(h.database.db).getSetupOutput(task.id);
    expect(setupOutput).toContain("setting up on feature/tools as agent");
    expect(setupOutput).toContain("setup done");

    // The pre-commit hook is ours, chains the hook that was there, and fails when ours fails.
    const hooks = await h.execIn(
      name,
      `cd /workspace/widgets && head -2 .git/hooks/pre-commit && ls .git/hooks | grep pre-commit &&
       git add -A && git commit -qm first && ls -a | grep hook-ran &&
       touch BLOCK_COMMIT && git add -A && if git commit -qm second; then echo committed; else echo refused; fi`,
    );
    expect(hooks.output).toContain("# tern: chained pre-commit hook");
    expect(hooks.output).toContain("pre-commit.local");
    expect(hooks.output).toContain(".local-hook-ran\n.openhands-hook-ran\n");
    expect(hooks.output.trim().endsWith("refused")).toBe(true);

    // Skills are stored with the conversation; the message activated the triggered one.
    const conversation = await conversationsRepository(h.database.db).get(task.appConversationId!);
    expect(conversation).toMatchObject({
      startTaskId: task.id,
      sandboxId: sandbox?.id,
      sandboxStatus: "RUNNING",
      workspaceDir: "/workspace/widgets",
      selectedRepository: "acme/widgets",
      selectedBranch: "feature/tools",
      title: "widgets",
    });
    expect(conversation?.skills.map((s) => [s.name, s.triggers, s.source]).sort()).toEqual([
      ["agents", [], "AGENTS.md"],
      ["deployer", ["deploy"], ".openhands/skills/deploy.md"],
      ["style", [], ".openhands/microagents/style.md"],
    ]);
    // The first events; the agent run the initial message started may have added its own after them.
    const events = (await eventsRepository(h.database.db).listAll(conversation!.id)).slice(0, 2);
    expect(events.map((e) => [e.kind, e.source])).toEqual([
      ["SystemPromptEvent", "agent"],
      ["MessageEvent", "user"],
    ]);
    const [systemPrompt] = events.filter((e) => e.kind === "SystemPromptEvent");
    const prompt = systemPrompt!.payload.system_prompt.text;
    expect(prompt).toContain("/workspace/widgets");
    expect(prompt).toContain("Always run the tests.");
    // The triggered skill is listed by name (its first line standing for a description), not put in whole.
    expect(prompt).toContain("<name>deployer</name>");
    expect(prompt).not.toContain('<skill name="deployer"');
    const tools = systemPrompt!.payload.tools;
    expect(tools.map((t) => t.function.name)).toEqual(expect.arrayContaining(["terminal", "file_editor", "finish"]));
    expect(events[1]?.payload).toEqual({
      llm_message: { role: "user", content: [{ type: "text", text: "please deploy it" }] },
      activated_skills: ["deployer"],
    });
    // As in OpenHands, the initial message starts the agent whatever its `run` says (here false);
    // the run is on the queue of the engine that holds the sandbox.
    const runs = await h.queues
      .forEngine(h.engineId)
      .agentRun.getJobs(["waiting", "active", "completed", "failed", "delayed"]);
    expect(runs.map((j) => j.data.conversationId)).toEqual([conversation!.id]);

    // The API reads the same conversation.
    const got = await fetch(`${api.url}/api/v1/app-conversations?ids=${toHexId(conversation!.id)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const [apiConversation] = (await got.json()) as { sandbox_status: string; id: string }[];
    expect(apiConversation).toMatchObject({ id: toHexId(conversation!.id), sandbox_status: "RUNNING" });
  });

  it("starts without a repository in an empty git workspace, and asks for the agent run", async () => {
    const res = await h.post(api, key, {
      initial_message: { role: "user", content: [{ type: "text", text: "hello" }], run: true },
    });
    expect(res.status).toBe(200);
    const { task, seen } = await h.waitForTask(((await res.json()) as { id: string }).id);
    expect(task.status).toBe("READY");
    expect(isInOrder(seen, allStages)).toBe(true);
    expect(stageKeys(task.stageDurations)).toEqual(allStages.slice(1, -1).sort());
    const conversation = await conversationsRepository(h.database.db).get(task.appConversationId!);
    expect(conversation?.workspaceDir).toBe("/workspace/project");
    expect(conversation?.skills).toEqual([]);
    const sandbox = await sandboxesRepository(h.database.db).findByTask(task.id);
    const ws = await h.execIn(
      sandbox!.name,
      "cd /workspace/project && git rev-parse --is-inside-work-tree && ls -A | tr '\\n' ' '",
    );
    expect(ws.output).toBe("true\n.git ");
    // One run for this conversation (the first test's start, run: false, asked for one too), on the
    // queue of the engine that holds the sandbox.
    const runs = await h.queues
      .forEngine(h.engineId)
      .agentRun.getJobs(["waiting", "active", "completed", "failed", "delayed"]);
    expect(runs.filter((j) => j.data.conversationId === conversation!.id)).toHaveLength(1);
  });

  it("answers a second delivery of a finished start job with no second container or conversation", async () => {
    const { userId } = await h.newUser();
    const taskId = await h.enqueueDirect(userId, {});
    const first = await h.waitForTask(taskId);
    expect(first.task.status).toBe("READY");
    // The same task delivered again (a new job for it): claim refuses, nothing is made twice.
    const again = await enqueue(h.queues, "conversation.start", { taskId }, { jobId: `${taskId}-again` });
    // The second delivery has run to its end: whatever it would make twice, it has made by now.
    await waitFor(
      async () => {
        const state = await h.queues.start.getJobState(again);
        return state === "completed" || state === "failed";
      },
      { what: "the second delivery to be processed" },
    );
    const rows = await h.database.db
      .selectFrom("conversations")
      .select("id")
      .where("start_task_id", "=", taskId)
      .execute();
    expect(rows).toHaveLength(1);
    const named = (await h.sandboxes()).filter((c) => c.labels["tern.task_id"] === uuidOf(taskId));
    expect(named).toHaveLength(1);
    expect((await startTasksRepository(h.database.db).get(taskId))?.status).toBe("READY");
  });

  it("logs each start it finished, as structured lines", () => {
    expect(worker.output()).toContain('"msg":"start task ready"');
  });
});
