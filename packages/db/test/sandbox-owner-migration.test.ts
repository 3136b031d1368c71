import { sql } from "kysely";
import type { Migrator } from "kysely/migration";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DbHandle } from "../src/connection.ts";
import { sandboxesRepository } from "../src/repositories/sandboxes.ts";
import { createStepwiseDatabase } from "./stepwise-database.ts";

let db: Awaited<ReturnType<typeof createStepwiseDatabase>>;
let handle: DbHandle;
let migrator: Migrator;

beforeAll(async () => {
  db = await createStepwiseDatabase();
  ({ handle, migrator } = db);
});

afterAll(async () => {
  await db?.close();
});

describe("migration 20261123_0020_sandbox_owner", () => {
  it("gives existing sandboxes the user of their start task, and new rows get it from the task", async () => {
    expect((await migrator.migrateTo("20261123_0005_sandbox_refs")).error).toBeUndefined();
    const user = "00000000-0000-4000-8000-0000000000aa";
    const task = "00000000-0000-4000-8000-0000000000bb";
    const sandbox = "00000000-0000-4000-8000-0000000000cc";
    await sql`insert into users (id) values (${user})`.execute(handle.db);
    await sql`insert into start_tasks (id, user_id, status, request) values (${task}, ${user}, 'READY', '{}')`.execute(
      handle.db,
    );
    await sql`insert into sandboxes (id, start_task_id, name, status, image)
              values (${sandbox}, ${task}, 'tern-task-old', 'RUNNING', 'img')`.execute(handle.db);
    await sql`insert into sandboxes (id, name, status, image)
              values ('00000000-0000-4000-8000-0000000000dd', 'tern-orphan', 'MISSING', 'img')`.execute(handle.db);

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    const sandboxes = sandboxesRepository(handle.db);
    expect((await sandboxes.get(sandbox))?.userId).toBe(user);
    expect((await sandboxes.findByName("tern-orphan"))?.userId).toBeNull();
    const made = await sandboxes.upsert({ name: "tern-task-new", image: "img", startTaskId: task });
    expect(made.userId).toBe(user);
    expect((await sandboxes.findForUser(user, [sandbox, made.id])).map((s) => s.id).sort()).toEqual(
      [sandbox, made.id].sort(),
    );

    expect((await migrator.migrateTo("20261123_0005_sandbox_refs")).error).toBeUndefined();
  });
});
