import { createUser } from "@tern/services";
import { parseCreateArgs } from "./create-verb.ts";
import type { CliDeps } from "./deps.ts";

const usage = "usage: cli users create [--name NAME] [--admin]";

/** `users create`: a new user without keys; prints its id alone (give it keys with `keys create --user ID`). */
export const usersCommand = async (deps: CliDeps, argv: string[]): Promise<number> => {
  const values = parseCreateArgs(argv, usage, {
    name: { type: "string" },
    admin: { type: "boolean", default: false },
  });
  if (!values) return 64;
  const user = await createUser(deps, { name: values.name ?? null, admin: values.admin });
  process.stdout.write(`${user.id}\n`);
  return 0;
};
