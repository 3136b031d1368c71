import { type ParseArgsConfig, parseArgs } from "node:util";

/**
 * The flags of `cli <noun> create …`, the one verb of the nouns that only make things; null (the
 * usage printed on stderr) for any other verb, and the command exits 64.
 */
export const parseCreateArgs = <O extends NonNullable<ParseArgsConfig["options"]>>(
  argv: string[],
  usage: string,
  options: O,
) => {
  const [verb, ...rest] = argv;
  if (verb !== "create") {
    process.stderr.write(`${usage}\n`);
    return null;
  }
  return parseArgs<{ args: string[]; options: O; strict: true }>({ args: rest, options, strict: true }).values;
};
