import { ConfigError, configFields, parseConfig, type SecretBox, secretBoxFromConfig } from "@tern/core";
import { createDb, migrateToLatest } from "@tern/db";
import { createClient, TernApiError } from "@tern/sdk";
import { z } from "zod";
import {
  type ClientCommandDeps,
  conversationsCommand,
  diffCommand,
  eventsCommand,
  UsageError,
} from "./commands/conversations.ts";
import { keysCommand } from "./commands/keys.ts";
import { secretsCommand } from "./commands/secrets.ts";
import { usersCommand } from "./commands/users.ts";

/** Operator commands: straight on the database. */
const operatorCommands = { keys: keysCommand, users: usersCommand, secrets: secretsCommand } as const;
/** Client commands: through the API, with a key, like any user's tool. */
const clientCommands = { conversations: conversationsCommand, events: eventsCommand, diff: diffCommand } as const;

const cliConfigSchema = z.object({
  DATABASE_URL: configFields.DATABASE_URL,
  API_KEY_MAX_LIFETIME_DAYS: configFields.API_KEY_MAX_LIFETIME_DAYS,
  MAX_KEYS_PER_USER: configFields.MAX_KEYS_PER_USER,
  SECRETS_KEY: configFields.SECRETS_KEY,
  SECRETS_KEY_FILE: configFields.SECRETS_KEY_FILE,
});

const clientConfigSchema = z.object({
  TERN_API_URL: z.url().default("http://localhost:3000"),
  TERN_API_KEY: z.string().min(1, "an API key is needed: set TERN_API_KEY"),
});

const runClientCommand = async (command: (d: ClientCommandDeps, a: string[]) => Promise<number>, rest: string[]) => {
  const config = parseConfig(clientConfigSchema, process.env);
  const deps: ClientCommandDeps = {
    client: createClient({ baseUrl: config.TERN_API_URL, apiKey: config.TERN_API_KEY }),
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  };
  try {
    return await command(deps, rest);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\n`);
      return 64;
    }
    if (err instanceof TernApiError) {
      process.stderr.write(`${err.message} (${err.status} ${err.code})\n`);
      return 1;
    }
    throw err;
  }
};

const main = async (): Promise<number> => {
  const [noun, ...rest] = process.argv.slice(2);
  const client = clientCommands[noun as keyof typeof clientCommands];
  if (client) return runClientCommand(client, rest);
  const command = operatorCommands[noun as keyof typeof operatorCommands];
  if (!command) {
    process.stderr.write(
      `usage: cli <${[...Object.keys(operatorCommands), ...Object.keys(clientCommands)].join("|")}> ...\n`,
    );
    return 64;
  }
  const config = parseConfig(cliConfigSchema, process.env);
  const { db, close } = createDb(config.DATABASE_URL, { max: 1 });
  try {
    await migrateToLatest(db);
    let box: SecretBox | undefined;
    const secretBox = () => {
      box ??= secretBoxFromConfig(config);
      return box;
    };
    return await command(
      { db, maxKeyLifetimeDays: config.API_KEY_MAX_LIFETIME_DAYS, maxKeysPerUser: config.MAX_KEYS_PER_USER, secretBox },
      rest,
    );
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
