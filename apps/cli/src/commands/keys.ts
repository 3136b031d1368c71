import { parseArgs } from "node:util";
import { generateApiKey } from "@tern/core";
import { apiKeysRepository, type Database, usersRepository } from "@tern/db";
import type { Kysely } from "kysely";

const usage = "usage: cli keys create --name NAME [--admin] [--expires-at ISO8601] [--if-none]";

/**
 * `keys create`: a new user with one key, printed alone on stdout (scripts capture it).
 * `--if-none` prints nothing when any user exists already: the first key, once.
 */
export const keysCommand = async (db: Kysely<Database>, argv: string[]): Promise<number> => {
  const [verb, ...rest] = argv;
  if (verb !== "create") {
    process.stderr.write(`${usage}\n`);
    return 64;
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: "string" },
      admin: { type: "boolean", default: false },
      "expires-at": { type: "string" },
      "if-none": { type: "boolean", default: false },
    },
    strict: true,
  });
  let expiresAt: string | null = null;
  if (values["expires-at"] !== undefined) {
    const t = Date.parse(values["expires-at"]);
    if (Number.isNaN(t) || t <= Date.now()) {
      process.stderr.write("--expires-at must be an ISO 8601 time in the future\n");
      return 64;
    }
    expiresAt = new Date(t).toISOString();
  }
  if (values["if-none"] && (await usersRepository(db).count()) > 0) return 0;
  const generated = generateApiKey();
  await db.transaction().execute(async (trx) => {
    const user = await usersRepository(trx).create({ isAdmin: values.admin });
    await apiKeysRepository(trx).create({
      userId: user.id,
      name: values.name ?? null,
      prefix: generated.prefix,
      hash: generated.hash,
      expiresAt,
    });
  });
  process.stdout.write(`${generated.key}\n`);
  return 0;
};
