import type { Kysely } from "kysely";
import type { Database } from "../schema.ts";

/** The start request's `secrets`, sealed, by start task. */
export const startTaskSecretsRepository = (db: Kysely<Database>) => ({
  async put(startTaskId: string, sealed: Record<string, string>): Promise<void> {
    const rows = Object.entries(sealed).map(([name, value]) => ({ start_task_id: startTaskId, name, value }));
    if (rows.length === 0) return;
    await db
      .insertInto("start_task_secrets")
      .values(rows)
      .onConflict((oc) =>
        oc.columns(["start_task_id", "name"]).doUpdateSet((eb) => ({ value: eb.ref("excluded.value") })),
      )
      .execute();
  },

  /** Name → sealed value. */
  async get(startTaskId: string): Promise<Record<string, string>> {
    const rows = await db
      .selectFrom("start_task_secrets")
      .select(["name", "value"])
      .where("start_task_id", "=", startTaskId)
      .execute();
    return Object.fromEntries(rows.map((r) => [r.name, r.value]));
  },

  async listAllSealed(): Promise<{ startTaskId: string; name: string; sealedValue: string }[]> {
    const rows = await db.selectFrom("start_task_secrets").selectAll().execute();
    return rows.map((r) => ({ startTaskId: r.start_task_id, name: r.name, sealedValue: r.value }));
  },

  async reseal(startTaskId: string, name: string, from: string, to: string): Promise<boolean> {
    const res = await db
      .updateTable("start_task_secrets")
      .set({ value: to })
      .where("start_task_id", "=", startTaskId)
      .where("name", "=", name)
      .where("value", "=", from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  },
});
