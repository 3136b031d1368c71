import { generateApiKey } from "@tern/core";
import { apiKeysRepository, type Database, usersRepository } from "@tern/db";
import type { Kysely } from "kysely";

/** A new user with one live API key, as the CLI makes them; returns the key's value once. */
export const createUserWithKey = async (
  db: Kysely<Database>,
  opts: { admin?: boolean; name?: string; expiresAt?: string | null } = {},
): Promise<{ userId: string; key: string }> => {
  const user = await usersRepository(db).create({ isAdmin: opts.admin ?? false });
  const generated = generateApiKey();
  await apiKeysRepository(db).create({
    userId: user.id,
    name: opts.name ?? "test",
    prefix: generated.prefix,
    hash: generated.hash,
    expiresAt: opts.expiresAt ?? null,
  });
  return { userId: user.id, key: generated.key };
};
