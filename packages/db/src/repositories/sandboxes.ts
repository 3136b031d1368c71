import { newId, type Sandbox, type SandboxStatus } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { Database, SandboxesTable } from "../schema.ts";

const toSandbox = (r: Selectable<SandboxesTable>): Sandbox => ({
  id: r.id,
  startTaskId: r.start_task_id,
  conversationId: r.conversation_id,
  containerName: r.container_name,
  containerId: r.container_id,
  status: r.status as SandboxStatus,
  image: r.image,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const sandboxesRepository = (db: Kysely<Database>) => ({
  /** Idempotent by container name: a second call for the same container returns the first row. */
  async upsert(input: {
    /** Defaults to a new id; a caller that must know it before the row exists passes its own. */
    id?: string;
    containerName: string;
    image: string;
    startTaskId?: string | null;
    conversationId?: string | null;
    status?: SandboxStatus;
  }): Promise<Sandbox> {
    await db
      .insertInto("sandboxes")
      .values({
        id: input.id ?? newId(),
        container_name: input.containerName,
        image: input.image,
        start_task_id: input.startTaskId ?? null,
        conversation_id: input.conversationId ?? null,
        status: input.status ?? "STARTING",
      })
      .onConflict((oc) => oc.column("container_name").doNothing())
      .execute();
    const row = await db
      .selectFrom("sandboxes")
      .selectAll()
      .where("container_name", "=", input.containerName)
      .executeTakeFirstOrThrow();
    return toSandbox(row);
  },

  async get(id: string): Promise<Sandbox | null> {
    const row = await db.selectFrom("sandboxes").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  async findByTask(startTaskId: string): Promise<Sandbox | null> {
    const row = await db
      .selectFrom("sandboxes")
      .selectAll()
      .where("start_task_id", "=", startTaskId)
      .executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  async findByContainerName(containerName: string): Promise<Sandbox | null> {
    const row = await db
      .selectFrom("sandboxes")
      .selectAll()
      .where("container_name", "=", containerName)
      .executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  async update(
    id: string,
    patch: Partial<{
      status: SandboxStatus;
      containerId: string | null;
      conversationId: string | null;
      startTaskId: string | null;
    }>,
  ): Promise<void> {
    await db
      .updateTable("sandboxes")
      .set({
        ...(patch.status !== undefined ? { status: patch.status } : {}),
        ...(patch.containerId !== undefined ? { container_id: patch.containerId } : {}),
        ...(patch.conversationId !== undefined ? { conversation_id: patch.conversationId } : {}),
        ...(patch.startTaskId !== undefined ? { start_task_id: patch.startTaskId } : {}),
        updated_at: sql<string>`clock_timestamp()`,
      })
      .where("id", "=", id)
      .execute();
  },
});

export type SandboxesRepository = ReturnType<typeof sandboxesRepository>;
