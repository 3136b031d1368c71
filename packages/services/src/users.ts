import { NotFoundError, type User } from "@tern/core";
import { type Database, usersRepository } from "@tern/db";
import type { Kysely } from "kysely";

/** A new user (an operator with `admin`), without a key: `issueApiKey` gives it its keys. */
export const createUser = (deps: { db: Kysely<Database> }, input: { name?: string | null; admin?: boolean } = {}) =>
  usersRepository(deps.db).create({ name: input.name ?? null, isAdmin: input.admin ?? false });

export const getUser = async (deps: { db: Kysely<Database> }, userId: string): Promise<User> => {
  const user = await usersRepository(deps.db).get(userId);
  if (!user) throw new NotFoundError("No such user");
  return user;
};
