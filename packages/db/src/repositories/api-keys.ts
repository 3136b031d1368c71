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

/** A key that is neither revoked nor expired, with its user. */
const findLive = async (
  db: Kysely<Database>,
  column: "key_hash" | "id",
  value: string,
): Promise<AuthenticatedKey | null> => {
  const row = await db
    .selectFrom("api_keys")
    .innerJoin("users", "users.id", "api_keys.user_id")
    .selectAll("api_keys")
    .select(["users.is_admin", "users.name as user_name", "users.created_at as user_created_at"])
    .where(column === "id" ? "api_keys.id" : "api_keys.key_hash", "=", value)
    .where("api_keys.revoked_at", "is", null)
    .where((eb) => eb.or([eb("api_keys.expires_at", "is", null), eb("api_keys.expires_at", ">", sql<string>`now()`)]))
    .executeTakeFirst();
  if (!row) return null;
  return {
    key: toApiKey(row),
    user: { id: row.user_id, name: row.user_name, isAdmin: row.is_admin, createdAt: row.user_created_at },
  };
};

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
    return findLive(db, "key_hash", hash);
  },

  /** A live key by its id (a dashboard session names the key it was opened with). */
  async findLiveById(id: string): Promise<AuthenticatedKey | null> {
    return findLive(db, "id", id);
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

  /** The user's live keys (not revoked, not expired), for the keys quota (api_keys_user_idx). */
  async countLiveForUser(userId: string): Promise<number> {
    const { n } = await db
      .selectFrom("api_keys")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("user_id", "=", userId)
      .where("revoked_at", "is", null)
      .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", sql<string>`now()`)]))
      .executeTakeFirstOrThrow();
    return Number(n);
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
