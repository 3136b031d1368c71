import { ConfigError, configFields, parseConfig } from "@tern/core";
import { createDb, migrateToLatest } from "@tern/db";
import { z } from "zod";
import { keysCommand } from "./commands/keys.ts";

const commands = { keys: keysCommand } as const;

const main = async (): Promise<number> => {
  const [noun, ...rest] = process.argv.slice(2);
  const command = commands[noun as keyof typeof commands];
  if (!command) {
    process.stderr.write(`usage: cli <${Object.keys(commands).join("|")}> ...\n`);
    return 64;
  }
  const config = parseConfig(z.object({ DATABASE_URL: configFields.DATABASE_URL }), process.env);
  const { db, close } = createDb(config.DATABASE_URL, { max: 1 });
  try {
    await migrateToLatest(db);
    return await command(db, rest);
  } finally {
    await close();
  }
};

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(
      `${err instanceof ConfigError ? err.message : `cli failed: ${err instanceof Error ? err.message : String(err)}`}\n`,
    );
    process.exit(err instanceof ConfigError ? 78 : 1);
  },
);
