import { rotateSecrets } from "@tern/services";
import type { CliDeps } from "./deps.ts";

const usage = "usage: cli secrets rotate-key";

/**
 * `secrets rotate-key`: seals every stored secret, start-request secret and LLM key again under the
 * first key of SECRETS_KEY. To rotate: put the new key first in SECRETS_KEY (the old one after
 * it), run this, restart the processes with the new SECRETS_KEY; once it reports 0 unreadable, drop
 * the old key. Prints the counts; exits 1 when some value did not open.
 */
export const secretsCommand = async (deps: CliDeps, argv: string[]): Promise<number> => {
  if (argv[0] !== "rotate-key" || argv.length > 1) {
    process.stderr.write(`${usage}\n`);
    return 64;
  }
  const result = await rotateSecrets({ db: deps.db, secretBox: deps.secretBox() });
  process.stdout.write(
    `resealed ${result.resealed}, already under key ${deps.secretBox().keyId} ${result.current}, unreadable ${result.unreadable}\n`,
  );
  return result.unreadable > 0 ? 1 : 0;
};
