import { randomUUID } from "node:crypto";
import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bashEventsRepository } from "../src/repositories/bash-events.ts";
import { sandboxesRepository } from "../src/repositories/sandboxes.ts";

/**
 * The one-statement paths of execute_bash_command (the bench's agent-server bash row): the API stores a command
 * only in a RUNNING sandbox, and the worker takes it and reads its sandbox in one statement,
 * taking nothing of a sandbox that is not running, of another sandbox, or already finished.
 */
let database: TestDatabase;
let n = 0;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

const sandboxIn = async (status: string) => {
  const { taskId, conversationId } = await createConversationFixture(database.db);
  const sandboxes = sandboxesRepository(database.db);
  const row = await sandboxes.upsert({ name: `tern-bash-${n++}`, image: "img", startTaskId: taskId });
  await sandboxes.update(row.id, { status: status as never, ref: `ref-${row.id}`, conversationId });
  await database.pool.query(`update conversations set workspace_dir = '/workspace/project' where id = $1`, [
    conversationId,
  ]);
  return row.id;
};

const command = (sandboxId: string) => ({ id: randomUUID(), sandboxId, command: "echo hi", cwd: null, timeout: 30 });

describe("bash events: execute_bash_command's statements", () => {
  it("stores a command only in a RUNNING sandbox, and says the status of one that is not", async () => {
    const repo = bashEventsRepository(database.db);
    const running = await sandboxIn("RUNNING");
    for (const flushedLater of [false, true]) {
      const c = command(running);
      const stored = await repo.insertCommandIfRunning(c, { flushedLater });
      expect(stored).toMatchObject({ status: "RUNNING", command: { id: c.id, command: "echo hi", timeout: 30 } });
      expect(await repo.getCommand(c.id)).toMatchObject({ id: c.id, sandboxId: running, finishedAt: null });
    }
    for (const status of ["PAUSED", "STARTING", "MISSING"]) {
      const id = await sandboxIn(status);
      const c = command(id);
      expect(await repo.insertCommandIfRunning(c)).toEqual({ status, engineId: null, full: false, command: null });
      expect(await repo.getCommand(c.id)).toBeNull();
    }
    expect(await repo.insertCommandIfRunning(command(randomUUID()))).toBeNull();
  });

  it("takes a command with its sandbox and workspace in one statement, and only an unfinished one of that sandbox", async () => {
    const repo = bashEventsRepository(database.db);
    const sandboxId = await sandboxIn("RUNNING");
    const c = command(sandboxId);
    await repo.insertCommand(c);
    const at = new Date();
    const taken = await repo.dispatchInSandbox(sandboxId, c.id, "worker-a", at);
    expect(taken?.sandbox).toMatchObject({ id: sandboxId, status: "RUNNING", ref: `ref-${sandboxId}` });
    expect(taken?.workspaceDir).toBe("/workspace/project");
    expect(taken?.command).toMatchObject({ id: c.id, command: "echo hi", workerId: "worker-a" });
    expect(await repo.getCommand(c.id)).toMatchObject({ workerId: "worker-a", dispatchedAt: at });

    // Another sandbox's command is not taken through this one.
    const other = await sandboxIn("RUNNING");
    expect((await repo.dispatchInSandbox(other, c.id, "worker-b", new Date()))?.command).toBeNull();
    expect(await repo.getCommand(c.id)).toMatchObject({ workerId: "worker-a" });

    // A finished command is not taken again.
    await repo.appendOutput(sandboxId, {
      id: randomUUID(),
      commandId: c.id,
      order: 0,
      exitCode: 0,
      stdout: "hi\n",
      stderr: null,
    });
    expect((await repo.dispatchInSandbox(sandboxId, c.id, "worker-b", new Date()))?.command).toBeNull();

    // A sandbox that is not running: its state comes back, the command is left untaken.
    const paused = await sandboxIn("PAUSED");
    const p = command(paused);
    await repo.insertCommand(p);
    const refused = await repo.dispatchInSandbox(paused, p.id, "worker-a", new Date());
    expect(refused?.sandbox.status).toBe("PAUSED");
    expect(refused?.command).toBeNull();
    expect(await repo.getCommand(p.id)).toMatchObject({ workerId: null, dispatchedAt: null });

    expect(await repo.dispatchInSandbox(randomUUID(), c.id, "worker-a", new Date())).toBeNull();
  });
});
