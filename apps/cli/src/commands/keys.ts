import { parseId, ValidationError } from "@tern/core";
import { usersRepository } from "@tern/db";
import { createUserWithKey, issueApiKey } from "@tern/services";
import { parseCreateArgs } from "./create-verb.ts";
import type { CliDeps } from "./deps.ts";

const usage = "usage: cli keys create [--user ID | --name NAME [--admin]] [--expires-at ISO8601] [--if-none]";

/**
 * `keys create`: a key, printed alone on stdout (scripts capture it). With `--user ID`, a key of
 * that user; otherwise a new user with one key (`--name` labels both). `--if-none` prints nothing
 * when any user exists already: the first key, once. `--expires-at` obeys the same lifetime cap as
 * every key (API_KEY_MAX_LIFETIME_DAYS), which is also the expiry when none is given.
 */
export const keysCommand = async (deps: CliDeps, argv: string[]): Promise<number> => {
  const values = parseCreateArgs(argv, usage, {
    name: { type: "string" },
    user: { type: "string" },
    admin: { type: "boolean", default: false },
    "expires-at": { type: "string" },
    "if-none": { type: "boolean", default: false },
  });
  if (!values) return 64;
  if (values["if-none"] && (await usersRepository(deps.db).count()) > 0) return 0;
  try {
    if (values.user !== undefined) {
      const userId = parseId(values.user);
      if (values.admin) {
        process.stderr.write("--admin makes a new user; a key of an existing user has that user's rights\n");
        return 64;
      }
      if (!userId || !(await usersRepository(deps.db).get(userId))) {
        process.stderr.write(`--user: no user ${values.user}\n`);
        return 64;
      }
      const { key } = await issueApiKey(deps, userId, {
        name: values.name ?? null,
        expiresAt: values["expires-at"] ?? null,
      });
      process.stdout.write(`${key}\n`);
      return 0;
    }
    const { key } = await createUserWithKey(deps, {
      admin: values.admin,
      name: values.name ?? null,
      userName: values.name ?? null,
      expiresAt: values["expires-at"] ?? null,
    });
    process.stdout.write(`${key}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    // The expiry is the one input the service checks here: name it as the flag that was typed.
    process.stderr.write(`${err.message.replace(/^expires_at:/, "--expires-at:")}\n`);
    return 64;
  }
};
