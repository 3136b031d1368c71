import type { SandboxSpec } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

export const sandboxSpecsRepository = (db: Kysely<Database>) => ({
  /**
   * The specs of `images`, in their order, each with the time the deployment first offered it:
   * an image seen for the first time is recorded now, in the same statement.
   */
  async offered(images: readonly string[]): Promise<SandboxSpec[]> {
    if (images.length === 0) return [];
    const rows = await sql<{ id: string; created_at: string }>`
      with inserted as (
        insert into sandbox_specs (id) select unnest(${[...images]}::text[])
        on conflict (id) do nothing
        returning id, created_at
      )
      select id, created_at from inserted
      union all
      select id, created_at from sandbox_specs where id = any(${[...images]}::text[])
    `.execute(db);
    const byId = new Map(rows.rows.map((r) => [r.id, r.created_at]));
    return images.flatMap((id) => {
      const createdAt = byId.get(id);
      return createdAt ? [{ id, createdAt }] : [];
    });
  },
});
