import { newId, type User } from "@tern/core";
import type { Kysely, Selectable } from "kysely";
import type { Database } from "../schema.ts";

const toUser = (row: Selectable<Database["users"]>): User => ({
  id: row.id,
  name: row.name,
  isAdmin: row.is_admin,
  createdAt: row.created_at,
});

export const usersRepository = (db: Kysely<Database>) => ({
  async create(opts: { isAdmin?: boolean; name?: string | null } = {}): Promise<User> {
    const row = await db
      .insertInto("users")
      .values({ id: newId(), is_admin: opts.isAdmin ?? false, name: opts.name ?? null })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toUser(row);
  },

  async get(id: string): Promise<User | null> {
    const row = await db.selectFrom("users").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toUser(row) : null;
  },

  /**
   * Inside a transaction: serialises the user's quota checks (starts, keys) until it commits, so
   * two requests cannot both take the last slot. `for no key update` leaves inserts that only
   * reference the user (its start tasks, keys, conversations) unblocked.
   */
  async lockForQuota(id: string): Promise<boolean> {
    const row = await db.selectFrom("users").select("id").where("id", "=", id).forNoKeyUpdate().executeTakeFirst();
    return row !== undefined;
  },

  async count(): Promise<number> {
    const { n } = await db
      .selectFrom("users")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .executeTakeFirstOrThrow();
    return Number(n);
  },
});

export type UsersRepository = ReturnType<typeof usersRepository>;
