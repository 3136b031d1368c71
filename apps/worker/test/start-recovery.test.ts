import { randomUUID } from "node:crypto";
import { toHexId } from "@tern/core";
import { conversationsRepository, eventsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { createDockerDriver, SandboxLabel } from "@tern/sandbox";
import { type ServiceProcess, testDocker, testSandboxNetworkName } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

let h: StartHarness;
let api: ServiceProcess;
let key: string;
let userId: string;
const driver = createDockerDriver(testDocker());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const waitUntil = async (what: string, check: () => Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
};

const statusOf = async (taskId: string) => (await startTasksRepository(h.database.db).get(uuidOf(taskId)))?.status;

// Counts its runs in the sandbox, so the test can tell the takeover did not run it twice.
const SLOW_SETUP = '#!/bin/bash\necho run >> "$HOME/setup-runs"\nsleep 3\necho done > setup-finished\n';
const janitorEnv = { JANITOR_INTERVAL_MS: "1000", START_TASK_DEADLINE: "60" };

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/slow", { ".openhands/setup.sh": SLOW_SETUP });
  api = await h.startApi();
  ({ key, userId } = await h.newUser());
});

afterAll(async () => {
  await h?.close();
  expect(await h.containers()).toEqual([]);
});

describe("a worker killed in the middle of a stage", () => {
  let survivor: ServiceProcess;
  let readyTaskId = "";

  it("is replaced by another worker that finishes the task: one container, one conversation, setup run once", async () => {
    const doomed = await h.startWorker({ WORKER_ID: "doomed", ...janitorEnv });
    const res = await h.post(api, key, {
      selected_repository: "acme/slow",
      initial_message: { role: "user", content: [{ type: "text", text: "go" }] },
    });
    const { id } = (await res.json()) as { id: string };
    await waitUntil("the setup script to start", async () => (await statusOf(id)) === "RUNNING_SETUP_SCRIPT");
    await doomed.kill();

    survivor = await h.startWorker({ WORKER_ID: "survivor", ...janitorEnv });
    const { task, seen } = await h.waitForTask(id, 45_000);
    expect(task.status).toBe("READY");
    expect(task.detail).toBeNull();
    // The second attempt owns it now, and went through the stages again from the sandbox on.
    expect(task.attempt).toBeGreaterThanOrEqual(2);
    readyTaskId = task.id;
    expect(seen).toContain("READY");
    // The log line follows the database write and crosses a pipe: wait for it rather than race it.
    await waitUntil("the survivor to log the start", async () =>
      survivor.output().includes('"msg":"start task ready"'),
    );
    expect(survivor.output()).toContain(`"task_id":"${task.id}"`);

    const containers = (await h.containers()).filter((c) => c.Labels[SandboxLabel.TaskId] === task.id);
    expect(containers).toHaveLength(1);
    const conversations = await h.database.db
      .selectFrom("conversations")
      .select("id")
      .where("start_task_id", "=", task.id)
      .execute();
    expect(conversations).toEqual([{ id: task.appConversationId }]);
    const events = await eventsRepository(h.database.db).listAll(task.appConversationId!);
    expect(events.map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    const runs = await h.execIn(
      containers[0]!.Names[0]!.slice(1),
      "cat $HOME/setup-runs; cat /workspace/slow/setup-finished",
    );
    expect(runs.output).toBe("run\ndone\n");
  });

  it("leaves a janitor that removes containers no live task or conversation owns, in any state", async () => {
    const tasks = startTasksRepository(h.database.db);
    const failed = await tasks.create(userId, {});
    await tasks.markError(failed.id, "WAITING_FOR_SANDBOX: test");
    const spec = (name: string, taskId: string) => ({
      name: `tern-test-${name}-${toHexId(randomUUID()).slice(0, 8)}`,
      image: process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest",
      labels: {
        [SandboxLabel.Marker]: "1",
        [SandboxLabel.Namespace]: h.prefix,
        [SandboxLabel.TaskId]: taskId,
        [SandboxLabel.ConversationId]: randomUUID(),
      },
      limits: { memoryMb: 128, cpus: 0.5, pids: 64 },
      network: testSandboxNetworkName(),
    });
    const ofFailedTask = await driver.create(spec("failed", failed.id));
    const ofNobody = await driver.create(spec("nobody", randomUUID()));
    const paused = await driver.create(spec("paused", randomUUID()));
    await driver.pause(paused.id).catch(() => undefined);
    const exited = await driver.create(spec("exited", randomUUID()));
    // The janitor may already be removing it (304 then): either way it must end up gone.
    await testDocker()
      .getContainer(exited.id)
      .stop({ t: 0 })
      .catch(() => undefined);
    // Another deployment's container is not ours to touch.
    const foreign = await driver.create({
      ...spec("foreign", randomUUID()),
      labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: `${h.prefix}-other` },
    });
    try {
      await waitUntil("the janitor to remove the orphans", async () => {
        const names = (await h.containers()).map((c) => c.Id);
        return ![ofFailedTask.id, ofNobody.id, paused.id, exited.id].some((id) => names.includes(id));
      });
      expect(await driver.inspect(foreign.id)).not.toBeNull();
      // The READY task's container is owned by its conversation: kept.
      expect((await h.containers()).length).toBe(1);
    } finally {
      await driver.destroy(foreign.id);
    }
  });

  it("removes a conversation's container once the conversation is gone", async () => {
    const container = (await h.containers()).find((c) => c.Labels[SandboxLabel.TaskId] === readyTaskId);
    const conversationId = container!.Labels[SandboxLabel.ConversationId]!;
    const sandboxId = container!.Labels[SandboxLabel.SandboxId]!;
    await h.database.db.deleteFrom("conversations").where("id", "=", conversationId).execute();
    await waitUntil(
      "the janitor to remove it",
      async () => !(await h.containers()).some((c) => c.Id === container!.Id),
    );
    // The row is marked after the container is gone.
    await waitUntil(
      "the sandbox row to say MISSING",
      async () => (await sandboxesRepository(h.database.db).get(sandboxId))?.status === "MISSING",
    );
  });

  it("ends a task that made no progress past the deadline in ERROR, naming its stage", async () => {
    const stuck = await startTasksRepository(h.database.db).create(userId, {});
    await h.database.db
      .updateTable("start_tasks")
      .set({ status: "PREPARING_REPOSITORY", updated_at: sql<string>`now() - interval '1 hour'` })
      .where("id", "=", stuck.id)
      .execute();
    const { task } = await h.waitForTask(stuck.id, 15_000);
    expect(task.status).toBe("ERROR");
    expect(task.detail).toBe("PREPARING_REPOSITORY: no progress for 60 s; the start was abandoned, try again");
  });

  it("re-enqueues a task in flight whose job Redis lost, and it ends READY", async () => {
    const lost = await startTasksRepository(h.database.db).create(userId, {});
    await h.database.db
      .updateTable("start_tasks")
      .set({ updated_at: sql<string>`now() - interval '20 seconds'` })
      .where("id", "=", lost.id)
      .execute();
    expect(await h.queues.start.getJob(lost.id)).toBeUndefined();
    const { task } = await h.waitForTask(lost.id, 20_000);
    expect(task.status).toBe("READY");
    await waitUntil("the janitor's log line", async () => survivor.output().includes("janitor re-enqueued"));
    expect(survivor.output()).toContain(
      `"task_id":"${lost.id}","stage":"WORKING","job_state":"missing","msg":"janitor re-enqueued a start task"`,
    );
    expect(await conversationsRepository(h.database.db).findByTask(lost.id)).not.toBeNull();
    await survivor.stop();
  });
});

describe("SIGTERM", () => {
  it("stops taking jobs, finishes the one it holds, and exits cleanly", async () => {
    const worker = await h.startWorker({ WORKER_ID: "graceful" });
    const res = await h.post(api, key, { selected_repository: "acme/slow" });
    const { id } = (await res.json()) as { id: string };
    await waitUntil("the setup script to start", async () => (await statusOf(id)) === "RUNNING_SETUP_SCRIPT");
    const exitCode = await worker.stop();
    expect(exitCode).toBe(0);
    // Finished before the process ended, by that process.
    expect(await statusOf(id)).toBe("READY");
    expect(worker.output()).toContain('"msg":"worker stopped"');
  });
});
