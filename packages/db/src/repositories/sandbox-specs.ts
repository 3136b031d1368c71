import type { SandboxSpec, SandboxSpecImage } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

/** A build's log is kept to this many characters (its end). */
const MAX_LOG_CHARS = 32 * 1024;

export const sandboxSpecsRepository = (db: Kysely<Database>) => ({
  /**
   * The specs of the configuration's `images`, in their order, then those an admin named, each with
   * the time the deployment first offered it: an image seen for the first time is recorded now, in
   * the same statement.
   */
  async offered(images: readonly string[]): Promise<SandboxSpec[]> {
    const rows = await sql<{ id: string; created_at: string; added_by: string | null }>`
      with inserted as (
        insert into sandbox_specs (id) select unnest(${[...images]}::text[])
        on conflict (id) do nothing
        returning id, created_at, added_by
      )
      select id, created_at, added_by from inserted
      union all
      select id, created_at, added_by from sandbox_specs
      where id = any(${[...images]}::text[]) or added_by is not null
    `.execute(db);
    const byId = new Map(rows.rows.map((r) => [r.id, r]));
    const configured = images.flatMap((id) => {
      const row = byId.get(id);
      return row ? [{ id, createdAt: row.created_at, addedBy: row.added_by }] : [];
    });
    const added = rows.rows
      .filter((r) => r.added_by !== null && !images.includes(r.id))
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id))
      .map((r) => ({ id: r.id, createdAt: r.created_at, addedBy: r.added_by }));
    return [...configured, ...added];
  },

  /** An admin names an image; naming one already offered changes nothing. */
  async add(id: string, adminId: string): Promise<void> {
    await db
      .insertInto("sandbox_specs")
      .values({ id, added_by: adminId })
      .onConflict((oc) =>
        oc.column("id").doUpdateSet({ added_by: sql`coalesce(sandbox_specs.added_by, excluded.added_by)` }),
      )
      .execute();
  },

  /** An admin's spec removed (the configuration's stay while configured); false when there was none. */
  async remove(id: string): Promise<boolean> {
    const res = await db
      .deleteFrom("sandbox_specs")
      .where("id", "=", id)
      .where("added_by", "is not", null)
      .executeTakeFirst();
    return res.numDeletedRows > 0n;
  },

  /** Every engine's runtime image of these specs. */
  async images(specIds: readonly string[]): Promise<SandboxSpecImage[]> {
    if (specIds.length === 0) return [];
    const rows = await db
      .selectFrom("sandbox_spec_images")
      .selectAll()
      .where("spec_id", "in", [...specIds])
      .orderBy("engine_id")
      .execute();
    return rows.map((r) => ({
      specId: r.spec_id,
      engineId: r.engine_id,
      state: r.state,
      image: r.image,
      error: r.error,
      log: r.log,
      updatedAt: r.updated_at,
    }));
  },

  /** What an engine's build of a spec's runtime image did (its log appended, kept to its end). */
  async recordImage(
    specId: string,
    engineId: string,
    set: {
      state: "building" | "ready" | "failed";
      image?: string | null;
      baseId?: string | null;
      toolsVersion?: string | null;
      log?: string;
      error?: string | null;
    },
  ): Promise<void> {
    const values = {
      spec_id: specId,
      engine_id: engineId,
      state: set.state,
      image: set.image ?? null,
      base_id: set.baseId ?? null,
      tools_version: set.toolsVersion ?? null,
      log: (set.log ?? "").slice(-MAX_LOG_CHARS),
      error: set.error ?? null,
      updated_at: sql<string>`now()`,
    };
    await db
      .insertInto("sandbox_spec_images")
      .values(values)
      .onConflict((oc) => oc.columns(["spec_id", "engine_id"]).doUpdateSet(values))
      .execute();
  },

  /** An engine's record of a runtime image forgotten (the janitor removed the image). */
  async forgetImage(specId: string, engineId: string): Promise<void> {
    await db
      .deleteFrom("sandbox_spec_images")
      .where("spec_id", "=", specId)
      .where("engine_id", "=", engineId)
      .execute();
  },
});
