import { sql } from "kysely";
import type { Migrator } from "kysely/migration";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DbHandle } from "../src/connection.ts";
import { sandboxesRepository } from "../src/repositories/sandboxes.ts";
import { createStepwiseDatabase } from "./stepwise-database.ts";

let db: Awaited<ReturnType<typeof createStepwiseDatabase>>;
let handle: DbHandle;
let migrator: Migrator;

const columnsOfSandboxes = async () =>
  (
    await sql<{ column_name: string }>`
      select column_name from information_schema.columns where table_name = 'sandboxes' order by column_name`.execute(
      handle.db,
    )
  ).rows.map((r) => r.column_name);

beforeAll(async () => {
  db = await createStepwiseDatabase();
  ({ handle, migrator } = db);
});

afterAll(async () => {
  await db?.close();
});

describe("migration 20261123_0005_sandbox_refs", () => {
  it("renames the container columns to name and ref, keeping the rows, and back down", async () => {
    const before = await migrator.migrateTo("20261122_0004_agent_runs");
    expect(before.error).toBeUndefined();
    const id = "00000000-0000-4000-8000-000000000001";
    await sql`insert into sandboxes (id, container_name, container_id, status, image)
              values (${id}, 'tern-task-abc', 'c0ffee', 'RUNNING', 'img')`.execute(handle.db);

    const up = await migrator.migrateTo("20261123_0005_sandbox_refs");
    expect(up.error).toBeUndefined();
    expect(await columnsOfSandboxes()).toEqual(expect.arrayContaining(["name", "ref"]));
    expect(await columnsOfSandboxes()).not.toContain("container_name");
    // Today's repository reads what later migrations add (owner, engine, …): all of them, which keep these rows.
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    const sandboxes = sandboxesRepository(handle.db);
    expect(await sandboxes.findByName("tern-task-abc")).toMatchObject({ id, name: "tern-task-abc", ref: "c0ffee" });
    // Still unique by name: a second upsert of the same name returns the first row.
    expect((await sandboxes.upsert({ name: "tern-task-abc", image: "img" })).id).toBe(id);
    await sandboxes.update(id, { ref: "d00d" });
    expect((await sandboxes.get(id))?.ref).toBe("d00d");

    const down = await migrator.migrateTo("20261122_0004_agent_runs");
    expect(down.error).toBeUndefined();
    expect(await columnsOfSandboxes()).toEqual(expect.arrayContaining(["container_name", "container_id"]));
    const row = await sql<{ container_name: string; container_id: string }>`
      select container_name, container_id from sandboxes where id = ${id}`.execute(handle.db);
    expect(row.rows).toEqual([{ container_name: "tern-task-abc", container_id: "d00d" }]);
  });
});
