import { toHexId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { SandboxLabel } from "@tern/sandbox";
import {
  type ApiClient,
  type ServiceProcess,
  sandboxesOfNamespace,
  startStack,
  type TestStack,
  testSandboxDriver,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uuidOf } from "./start-harness.ts";

/**
 * The API's warm claim end to end: real API and worker processes, real sandboxes, the scripted LLM. A start
 * without a repository is READY in the answer to its POST (the API claimed a warm row), its agent
 * runs in the claimed sandbox, and a claimed sandbox found dead is replaced with no client error.
 */
let stack: TestStack;
let client: ApiClient;

interface TaskView {
  id: string;
  status: string;
  app_conversation_id: string | null;
  sandbox_id: string | null;
}
interface EventView {
  kind: string;
  source: string;
  observation?: unknown;
  llm_message?: { content: { text?: string }[] };
}

const unclaimedRows = async (owner: string) =>
  stack.database.db
    .selectFrom("warm_sandboxes")
    .selectAll()
    .where("owner_worker", "=", owner)
    .where("claimed_at", "is", null)
    .execute();

const waitForRows = (owner: string, n: number) =>
  waitFor(async () => (await unclaimedRows(owner)).length >= n, {
    what: `${n} warm rows of ${owner}`,
    timeoutMs: 90_000,
  });

const post = (body: unknown) =>
  client.json<TaskView>(client.call("/api/v1/app-conversations", { method: "POST", json: body }));

beforeAll(async () => {
  stack = await startStack({ llm: true, api: true });
  const { key } = await stack.newUser({ name: "warm" });
  client = stack.client(key);
});

afterAll(async () => {
  await stack?.close();
});

describe("a warm start is READY in the answer to its POST", () => {
  let worker: ServiceProcess;

  it("claims a warm sandbox: READY with the conversation, its events and stage history, and the agent runs in it", async () => {
    worker = await stack.startWorker({ WORKER_ID: "warm-1", SANDBOX_POOL_SIZE: "2" });
    await waitForRows("warm-1", 2);
    stack.llm.pushFor(
      "WARM-CLAIM-1",
      {
        toolCalls: [
          {
            name: "terminal",
            arguments: {
              command: "echo RAN-IN-WARM > /workspace/project/warm-mark && cat /workspace/project/warm-mark",
            },
          },
        ],
      },
      { text: "done in the warm sandbox" },
    );
    const task = await post({
      initial_message: { role: "user", content: [{ type: "text", text: "WARM-CLAIM-1 say hi" }] },
    });
    // The answer itself: no polling.
    expect(task.status).toBe("READY");
    expect(task.app_conversation_id).toMatch(/^[0-9a-f]{32}$/);
    const conversationId = task.app_conversation_id as string;

    // Stage history, each stage with its time, committed with the answer.
    const row = await stack.database.db
      .selectFrom("start_tasks")
      .select(["stage_history"])
      .where("id", "=", uuidOf(task.id))
      .executeTakeFirstOrThrow();
    expect(row.stage_history.map((h) => h.status)).toEqual([
      "WORKING",
      "WAITING_FOR_SANDBOX",
      "PREPARING_REPOSITORY",
      "RUNNING_SETUP_SCRIPT",
      "SETTING_UP_GIT_HOOKS",
      "SETTING_UP_SKILLS",
      "STARTING_CONVERSATION",
      "READY",
    ]);
    expect(row.stage_history.every((h) => Number.isFinite(Date.parse(h.at)))).toBe(true);

    // Its first events are there at once.
    const first = await client.events<EventView>(conversationId);
    expect(first.slice(0, 2).map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);

    // The sandbox is a warm one of the pool; the agent runs in it.
    const sandbox = await sandboxesRepository(stack.database.db).get(uuidOf(task.sandbox_id as string));
    expect(sandbox?.name).toMatch(/^tern-pool-/);
    await client.settle(conversationId, () => stack.llm.remainingFor("WARM-CLAIM-1"));
    const events = await client.events<EventView>(conversationId);
    const observed = JSON.stringify(events.filter((e) => e.kind === "ObservationEvent"));
    expect(observed).toContain("RAN-IN-");
    expect(events.some((e) => e.kind === "AgentErrorEvent")).toBe(false);
    // In the claimed container itself: the file the agent wrote is there.
    const mark = await testSandboxDriver().exec(sandbox?.ref as string, {
      cmd: ["cat", "/workspace/project/warm-mark"],
    });
    expect(mark.stdout.trim()).toBe("RAN-IN-WARM");
    // Checked by the run's first exec, the claimed row has done its work.
    await waitFor(
      async () =>
        (
          await stack.database.db
            .selectFrom("warm_sandboxes")
            .select("id")
            .where("id", "=", sandbox?.id as string)
            .execute()
        ).length === 0,
      { what: "the claimed row to go" },
    );
    // The pool refills what the API took.
    await waitForRows("warm-1", 2);
  });

  it("a claimed sandbox that turns out dead is replaced by the run; the conversation keeps its events and no client sees an error", async () => {
    // A worker killed outright: its rows stay fresh a while, its containers stay; the API claims one.
    await worker.kill();
    const [row] = await unclaimedRows("warm-1");
    expect(row).toBeDefined();
    stack.llm.pushFor(
      "WARM-DEAD-1",
      { toolCalls: [{ name: "terminal", arguments: { command: "echo ALIVE-AGAIN" } }] },
      { text: "done after the move" },
    );
    const task = await post({
      initial_message: { role: "user", content: [{ type: "text", text: "WARM-DEAD-1 go" }] },
    });
    expect(task.status).toBe("READY");
    const conversationId = task.app_conversation_id as string;
    const sandboxId = uuidOf(task.sandbox_id as string);
    const claimed = await sandboxesRepository(stack.database.db).get(sandboxId);
    expect(claimed?.name).toMatch(/^tern-pool-/);

    // After the claim, the container dies.
    await testSandboxDriver().destroy(claimed?.ref as string);
    const before = await client.events<EventView>(conversationId);

    // A worker comes; the run's first exec finds the sandbox dead and moves the conversation.
    await stack.startWorker({ WORKER_ID: "warm-2", SANDBOX_POOL_SIZE: "0" });
    const done = await client.settle<{ execution_status: string; sandbox_status: string }>(conversationId, () =>
      stack.llm.remainingFor("WARM-DEAD-1"),
    );
    expect(done.execution_status).toBe("finished");
    expect(done.sandbox_status).toBe("RUNNING");

    const events = await client.events<EventView & { id: string }>(conversationId);
    // Kept: the events from before the move, in place.
    expect(events.slice(0, before.length).map((e) => e.kind)).toEqual(before.map((e) => e.kind));
    expect(JSON.stringify(events.filter((e) => e.kind === "ObservationEvent"))).toContain("ALIVE-AGAIN");
    expect(events.some((e) => e.kind === "AgentErrorEvent")).toBe(false);

    // Same sandbox id, a fresh container of its own name, running, labelled for the conversation.
    const moved = await sandboxesRepository(stack.database.db).get(sandboxId);
    expect(moved?.status).toBe("RUNNING");
    expect(moved?.name).toBe(
      (await sandboxesOfNamespace(stack.prefix)).find(
        (c) => c.labels[SandboxLabel.SandboxId] === sandboxId && c.state === "running",
      )?.name,
    );
    expect(moved?.name).toMatch(new RegExp(`^tern-sbx-${toHexId(sandboxId)}-`));
    // The start task never saw an error.
    const [t] = await client.json<(TaskView | null)[]>(
      client.call(`/api/v1/app-conversations/start-tasks?ids=${task.id}`),
    );
    expect(t?.status).toBe("READY");
  });
});
