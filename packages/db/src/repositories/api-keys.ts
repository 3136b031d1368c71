import { type ApiKey, newId, type User } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { ApiKeysTable, Database } from "../schema.ts";

const toApiKey = (r: Selectable<ApiKeysTable>): ApiKey => ({
  id: r.id,
  userId: r.user_id,
  name: r.name,
  prefix: r.prefix,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

export interface AuthenticatedKey {
  key: ApiKey;
  user: User;
}

export const apiKeysRepository = (db: Kysely<Database>) => ({
  async create(input: {
    userId: string;
    name: string | null;
    prefix: string;
    hash: string;
    expiresAt: string | null;
  }): Promise<ApiKey> {
    const row = await db
      .insertInto("api_keys")
      .values({
        id: newId(),
        user_id: input.userId,
        name: input.name,
        prefix: input.prefix,
        key_hash: input.hash,
        expires_at: input.expiresAt,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toApiKey(row);
  },

  /** A live key by its hash: not revoked, not expired. Served by the unique index on key_hash. */
  async findLiveByHash(hash: string): Promise<AuthenticatedKey | null> {
    const row = await db
      .selectFrom("api_keys")
      .innerJoin("users", "users.id", "api_keys.user_id")
      .selectAll("api_keys")
      .select(["users.is_admin", "users.created_at as user_created_at"])
      .where("api_keys.key_hash", "=", hash)
      .where("api_keys.revoked_at", "is", null)
      .where((eb) => eb.or([eb("api_keys.expires_at", "is", null), eb("api_keys.expires_at", ">", sql<string>`now()`)]))
      .executeTakeFirst();
    if (!row) return null;
    return {
      key: toApiKey(row),
      user: { id: row.user_id, isAdmin: row.is_admin, createdAt: row.user_created_at },
    };
  },

  async listForUser(userId: string): Promise<ApiKey[]> {
    const rows = await db
      .selectFrom("api_keys")
      .selectAll()
      .where("user_id", "=", userId)
      .where("revoked_at", "is", null)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute();
    return rows.map(toApiKey);
  },

  /** Revokes the caller's own key; false when there is no such live key of theirs. */
  async revoke(userId: string, id: string): Promise<boolean> {
    const res = await db
      .updateTable("api_keys")
      .set({ revoked_at: sql<string>`now()` })
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .where("revoked_at", "is", null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  },

  /** Batched: callers collect used key ids and flush them, so a request costs no write. */
  async touch(ids: string[], at: Date = new Date()): Promise<void> {
    if (ids.length === 0) return;
    await db.updateTable("api_keys").set({ last_used_at: at }).where("id", "in", ids).execute();
  },
});

export type ApiKeysRepository = ReturnType<typeof apiKeysRepository>;
