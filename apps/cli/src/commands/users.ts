import { parseArgs } from "node:util";
import { createUser } from "@tern/services";
import type { CliDeps } from "./deps.ts";

const usage = "usage: cli users create [--name NAME] [--admin]";

/** `users create`: a new user without keys; prints its id alone (give it keys with `keys create --user ID`). */
export const usersCommand = async (deps: CliDeps, argv: string[]): Promise<number> => {
  const [verb, ...rest] = argv;
  if (verb !== "create") {
    process.stderr.write(`${usage}\n`);
    return 64;
  }
  const { values } = parseArgs({
    args: rest,
    options: { name: { type: "string" }, admin: { type: "boolean", default: false } },
    strict: true,
  });
  const user = await createUser(deps, { name: values.name ?? null, admin: values.admin });
  process.stdout.write(`${user.id}\n`);
  return 0;
};
