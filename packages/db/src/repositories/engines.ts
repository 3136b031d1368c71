import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

/**
 * The sandbox engines of the deployment and their last sign of life. Every worker of an engine
 * beats for it; an engine none of whose workers beat for ENGINE_LOST_AFTER is lost, and its
 * sandboxes with it (their jobs had been waiting for one of its workers until then).
 */
export const enginesRepository = (db: Kysely<Database>) => ({
  /** A worker of `engineId` is alive now; an engine given up on that comes back is no longer lost. */
  async beat(engineId: string): Promise<void> {
    await db
      .insertInto("engines")
      .values({ id: engineId })
      .onConflict((oc) => oc.column("id").doUpdateSet({ last_seen_at: sql<string>`now()`, lost_at: null }))
      .execute();
  },

  /**
   * Engines without a beat for `afterSeconds` and not yet given up on are given up on now
   * (`lost_at` set); returns their ids. One statement, so two janitors give up on an engine once.
   */
  async giveUpSilent(afterSeconds: number): Promise<string[]> {
    const rows = await db
      .updateTable("engines")
      .set({ lost_at: sql<string>`now()` })
      .where("lost_at", "is", null)
      .where("last_seen_at", "<", sql<string>`now() - make_interval(secs => ${afterSeconds})`)
      .returning("id")
      .execute();
    return rows.map((r) => r.id);
  },
});
