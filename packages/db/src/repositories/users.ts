import { newId, type User } from "@tern/core";
import type { Kysely } from "kysely";
import type { Database } from "../schema.ts";

export const usersRepository = (db: Kysely<Database>) => ({
  async create(opts: { isAdmin?: boolean } = {}): Promise<User> {
    const row = await db
      .insertInto("users")
      .values({ id: newId(), is_admin: opts.isAdmin ?? false })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { id: row.id, isAdmin: row.is_admin, createdAt: row.created_at };
  },

  async get(id: string): Promise<User | null> {
    const row = await db.selectFrom("users").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? { id: row.id, isAdmin: row.is_admin, createdAt: row.created_at } : null;
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
