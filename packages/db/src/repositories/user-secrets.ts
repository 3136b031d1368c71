import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

/** A user's secret as stored: `value` is sealed (the repository never sees it in clear). */
export interface StoredUserSecret {
  userId: string;
  name: string;
  description: string | null;
  sealedValue: string;
  createdAt: string;
  updatedAt: string;
}

const toSecret = (r: {
  user_id: string;
  name: string;
  description: string | null;
  value: string;
  created_at: string;
  updated_at: string;
}): StoredUserSecret => ({
  userId: r.user_id,
  name: r.name,
  description: r.description,
  sealedValue: r.value,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const userSecretsRepository = (db: Kysely<Database>) => ({
  /** The user's secrets by name (primary key (user_id, name)). */
  async list(userId: string): Promise<StoredUserSecret[]> {
    const rows = await db
      .selectFrom("user_secrets")
      .selectAll()
      .where("user_id", "=", userId)
      .orderBy("name")
      .execute();
    return rows.map(toSecret);
  },

  async get(userId: string, name: string): Promise<StoredUserSecret | null> {
    const row = await db
      .selectFrom("user_secrets")
      .selectAll()
      .where("user_id", "=", userId)
      .where("name", "=", name)
      .executeTakeFirst();
    return row ? toSecret(row) : null;
  },

  async count(userId: string): Promise<number> {
    const { n } = await db
      .selectFrom("user_secrets")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("user_id", "=", userId)
      .executeTakeFirstOrThrow();
    return Number(n);
  },

  /** False when the user has a secret of that name already. */
  async create(input: { userId: string; name: string; description: string | null; sealedValue: string }) {
    const row = await db
      .insertInto("user_secrets")
      .values({ user_id: input.userId, name: input.name, description: input.description, value: input.sealedValue })
      .onConflict((oc) => oc.columns(["user_id", "name"]).doNothing())
      .returningAll()
      .executeTakeFirst();
    return row ? toSecret(row) : null;
  },

  /** Changes what is given; null when the user has no such secret. */
  async update(
    userId: string,
    name: string,
    change: { description?: string | null; sealedValue?: string },
  ): Promise<StoredUserSecret | null> {
    const row = await db
      .updateTable("user_secrets")
      .set({
        ...(change.description !== undefined ? { description: change.description } : {}),
        ...(change.sealedValue !== undefined ? { value: change.sealedValue } : {}),
        updated_at: sql<string>`now()`,
      })
      .where("user_id", "=", userId)
      .where("name", "=", name)
      .returningAll()
      .executeTakeFirst();
    return row ? toSecret(row) : null;
  },

  async delete(userId: string, name: string): Promise<boolean> {
    const res = await db
      .deleteFrom("user_secrets")
      .where("user_id", "=", userId)
      .where("name", "=", name)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  },

  /** Every stored secret, for a key rotation (an operator's batch, not a request path). */
  async listAllSealed(): Promise<{ userId: string; name: string; sealedValue: string }[]> {
    const rows = await db.selectFrom("user_secrets").select(["user_id", "name", "value"]).execute();
    return rows.map((r) => ({ userId: r.user_id, name: r.name, sealedValue: r.value }));
  },

  /** Rotation: replaces a sealed value only if it is still the one read (a concurrent change wins). */
  async reseal(userId: string, name: string, from: string, to: string): Promise<boolean> {
    const res = await db
      .updateTable("user_secrets")
      .set({ value: to })
      .where("user_id", "=", userId)
      .where("name", "=", name)
      .where("value", "=", from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  },
});

export type UserSecretsRepository = ReturnType<typeof userSecretsRepository>;
