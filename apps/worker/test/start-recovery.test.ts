import { randomUUID } from "node:crypto";
import { toHexId } from "@tern/core";
import { conversationsRepository, eventsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { dockerEngineFromEnv, SandboxLabel } from "@tern/sandbox";
import { createDockerProbe } from "@tern/sandbox/docker";
import { type ServiceProcess, testSandboxDriver, waitFor } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

let h: StartHarness;
let api: ServiceProcess;
let key: string;
let userId: string;
const driver = testSandboxDriver();

const statusOf = async (taskId: string) => (await startTasksRepository(h.database.db).get(uuidOf(taskId)))?.status;

// Counts its runs in the sandbox, so the test can tell the takeover did not run it twice.
const SLOW_SETUP = '#!/bin/bash\necho run >> "$HOME/setup-runs"\nsleep 3\necho done > setup-finished\n';
// The same, but it finishes only once the test opens its gate (a file in the sandbox): so the test
// decides when the run in the fresh sandbox ends.
const GATED_SETUP =
  '#!/bin/bash\necho run >> "$HOME/setup-runs"\nuntil [ -f /tmp/gate ]; do sleep 0.1; done\necho done > setup-finished\n';
const janitorEnv = { JANITOR_INTERVAL_MS: "1000", START_TASK_DEADLINE: "60" };

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/slow", { ".openhands/setup.sh": SLOW_SETUP });
  await h.git.createFixtureRepo("acme/gated", { ".openhands/setup.sh": GATED_SETUP });
  api = await h.startApi();
  ({ key, userId } = await h.newUser());
});

afterAll(async () => {
  await h?.close();
  expect(await h.sandboxes()).toEqual([]);
});

describe("a worker killed in the middle of a stage", () => {
  let survivor: ServiceProcess;
  let readyTaskId = "";

  it("is replaced by another worker that starts over in a fresh sandbox once the setup script had begun: one container, one conversation", async () => {
    const doomed = await h.startWorker({ WORKER_ID: "doomed", ...janitorEnv });
    const res = await h.post(api, key, {
      selected_repository: "acme/gated",
      initial_message: { role: "user", content: [{ type: "text", text: "go" }] },
    });
    const { id } = (await res.json()) as { id: string };
    await waitFor(async () => (await statusOf(id)) === "RUNNING_SETUP_SCRIPT", { what: "the setup script to start" });
    const sandboxesOfTask = async () =>
      (await h.sandboxes()).filter((c) => c.labels[SandboxLabel.TaskId] === uuidOf(id));
    const [first] = await sandboxesOfTask();
    expect(first).toBeDefined();
    await doomed.kill();

    survivor = await h.startWorker({ WORKER_ID: "survivor", ...janitorEnv });
    // The repository's code had begun in the first sandbox: the second attempt does not go back
    // through the earlier stages in it (that code may be watching for them). It removes it and
    // begins again in a fresh one, where the setup script runs once more, gated again.
    const fresh = await waitFor(
      async () => {
        const found = await sandboxesOfTask();
        const other = found.find((c) => c.name !== first!.name);
        // Made but not yet started, an exec is refused (409): not yet, then.
        const ran = other && (await h.execIn(other.name, "test -s $HOME/setup-runs").catch(() => ({ exitCode: -1 })));
        return !!ran && ran.exitCode === 0 && other;
      },
      { what: "the setup script to run in a fresh sandbox" },
    );
    await h.execIn(fresh.name, "touch /tmp/gate");
    const { task, seen } = await h.waitForTask(id, 45_000);
    expect(task.status).toBe("READY");
    expect(task.detail).toBeNull();
    expect(task.attempt).toBeGreaterThanOrEqual(2);
    readyTaskId = task.id;
    expect(seen).toContain("READY");
    expect((await h.queues.start.getJob(task.id))?.processedBy).toBe("survivor");

    const containers = await sandboxesOfTask();
    expect(containers.map((c) => c.name)).toEqual([fresh.name]);
    const conversations = await h.database.db
      .selectFrom("conversations")
      .select(["id", "sandbox_id"])
      .where("start_task_id", "=", task.id)
      .execute();
    expect(conversations.map((c) => c.id)).toEqual([task.appConversationId]);
    const row = await sandboxesRepository(h.database.db).findByTask(task.id);
    expect(row?.name).toBe(fresh.name);
    expect(conversations[0]?.sandbox_id).toBe(row?.id);
    const events = await eventsRepository(h.database.db).listAll(task.appConversationId!);
    // The start's first events were written once, whatever ran twice; the initial message then
    // started the agent (as OpenHands does), whose own events follow.
    expect(events.slice(0, 2).map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    expect(events.filter((e) => e.kind === "SystemPromptEvent")).toHaveLength(1);
    expect(events.filter((e) => e.kind === "MessageEvent" && e.source === "user")).toHaveLength(1);
    const runs = await h.execIn(fresh.name, "cat $HOME/setup-runs; cat /workspace/gated/setup-finished");
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
    });
    const ofFailedTask = await driver.create(spec("failed", failed.id));
    const nobodyMadeAt = Date.now();
    const ofNobody = await driver.create(spec("nobody", randomUUID()));
    const paused = await driver.create(spec("paused", randomUUID()));
    await driver.pause(paused.ref).catch(() => undefined);
    const exited = await driver.create(spec("exited", randomUUID()));
    // The janitor may already be removing it (304 then): either way it must end up gone.
    await createDockerProbe(dockerEngineFromEnv(process.env))
      .stop(exited.ref)
      .catch(() => undefined);
    // Another deployment's container is not ours to touch.
    const foreign = await driver.create({
      ...spec("foreign", randomUUID()),
      labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: `${h.prefix}-other` },
    });
    const janitor = await h.watchJanitor();
    try {
      await waitFor(
        async () => {
          const names = (await h.sandboxes()).map((c) => c.ref);
          return ![ofFailedTask.ref, ofNobody.ref, paused.ref, exited.ref].some((ref) => names.includes(ref));
        },
        { what: "the janitor to remove the orphans" },
      );
      // One that no row names yet is given 10 s, the time a creator takes to commit the rows that will
      // own it (a sweep runs every second here): not removed as an orphan before.
      expect(Date.now() - nobodyMadeAt).toBeGreaterThanOrEqual(10_000);
      // A whole sweep begun after every sandbox above was made: what it kept, it keeps.
      await janitor.after(1);
      expect(await driver.inspect(foreign.ref)).not.toBeNull();
      // The READY task's container is owned by its conversation: kept.
      expect((await h.sandboxes()).length).toBe(1);
    } finally {
      await driver.destroy(foreign.ref);
    }
  });

  it("removes a conversation's container once the conversation is gone", async () => {
    const container = (await h.sandboxes()).find((c) => c.labels[SandboxLabel.TaskId] === readyTaskId);
    const conversationId = container!.labels[SandboxLabel.ConversationId]!;
    const sandboxId = container!.labels[SandboxLabel.SandboxId]!;
    await h.database.db.deleteFrom("conversations").where("id", "=", conversationId).execute();
    await waitFor(async () => !(await h.sandboxes()).some((c) => c.ref === container!.ref), {
      what: "the janitor to remove it",
    });
    // The row is marked after the container is gone.
    await waitFor(async () => (await sandboxesRepository(h.database.db).get(sandboxId))?.status === "MISSING", {
      what: "the sandbox row to say MISSING",
    });
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
    // A new job, made by the janitor (only the reconciler sets attemptBase), run by the survivor.
    const job = await h.queues.start.getJob(lost.id);
    expect(job?.data).toEqual({ taskId: lost.id, attemptBase: 0 });
    expect(job?.processedBy).toBe("survivor");
    expect(await conversationsRepository(h.database.db).findByTask(lost.id)).not.toBeNull();
    // Stopped, its output is complete: the log lines are read, not waited for.
    expect(await survivor.stop()).toBe(0);
    expect(survivor.output()).toContain(
      `"task_id":"${lost.id}","stage":"WORKING","job_state":"missing","msg":"janitor re-enqueued a start task"`,
    );
    expect(survivor.output()).toContain(`"task_id":"${readyTaskId}"`);
    expect(survivor.output()).toContain('"msg":"start task ready"');
  });
});

describe("SIGTERM", () => {
  it("stops taking jobs, finishes the one it holds, and exits cleanly", async () => {
    const worker = await h.startWorker({ WORKER_ID: "graceful" });
    const res = await h.post(api, key, { selected_repository: "acme/slow" });
    const { id } = (await res.json()) as { id: string };
    await waitFor(async () => (await statusOf(id)) === "RUNNING_SETUP_SCRIPT", { what: "the setup script to start" });
    const exitCode = await worker.stop();
    expect(exitCode).toBe(0);
    // Finished before the process ended, by that process.
    expect(await statusOf(id)).toBe("READY");
    expect(worker.output()).toContain('"msg":"worker stopped"');
  });
});
