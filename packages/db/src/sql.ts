import { readdirSync, readFileSync } from "node:fs";
import { type Kysely, sql } from "kysely";

/**
 * The database's atomic commands, one named file each under `sql/` (as BullMQ keeps its Lua
 * commands in `commands/*.lua`): a plpgsql function is read and reviewed as SQL, never as a string
 * inside a migration. A migration loads the files it names (`create or replace`); a change to a
 * file comes with a new migration that loads it again, so every database gets it.
 */
const dir = new URL("./sql/", import.meta.url);

const sqlCommand = (name: string): string => readFileSync(new URL(`${name}.sql`, dir), "utf8");

export const loadSqlCommands = async (db: Kysely<unknown>, names: string[]): Promise<void> => {
  for (const name of names) await sql.raw(sqlCommand(name)).execute(db);
};

/** Every command file's name and text: a test template built from other texts is stale. */
export const sqlCommandsFingerprint = (): string =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((f) => `${f}\n${readFileSync(new URL(f, dir), "utf8")}`)
    .join("\n");
