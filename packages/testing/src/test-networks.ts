import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Each test process (one test file, or one `pnpm bench`) runs its sandboxes on a network of its own,
 * named for its pid. Egress rules are per network (per bridge): files that ran side by side on one
 * shared network replaced each other's rules, and a rule left behind by an earlier worker (egress
 * rules outlive their worker on purpose) refused another file's sandbox the way to its git server.
 * SANDBOX_NETWORK, when set, names one network for every process instead.
 */
const PREFIX = "tern-t-";

export const testSandboxNetworkName = (): string => process.env.SANDBOX_NETWORK ?? `${PREFIX}${process.pid}`;

/**
 * The DOCKER_HOSTs of the test engines this process asked for (engine.ts notes each): kept here, not
 * read from engine.ts, so that every test file's teardown stays free of the sandbox driver's imports.
 */
const testEngines: Promise<string>[] = [];
export const noteTestEngine = (host: Promise<string>): void => {
  testEngines.push(host);
};

const dockerAt = (host: string | undefined, args: string[]) =>
  run("docker", args, { env: host ? { ...process.env, DOCKER_HOST: host } : process.env, timeout: 60_000 });

/** Removes a network; one still in use (a sandbox left behind) is left too, for the sweep. */
const removeNetwork = async (host: string | undefined, name: string) => {
  await dockerAt(host, ["network", "rm", name]).catch(() => undefined);
};

/** This process's own network, on the main engine and on every test engine it started. */
export const removeOwnTestNetwork = async (): Promise<void> => {
  if (process.env.SANDBOX_NETWORK) return;
  const engines = (await Promise.allSettled(testEngines)).flatMap((r) =>
    r.status === "fulfilled" && r.value ? [r.value] : [],
  );
  const hosts = [undefined, ...engines];
  await Promise.all(hosts.map((h) => removeNetwork(h, testSandboxNetworkName())));
};

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** The main engine's test networks whose process is gone (a crashed or killed run's). */
export const removeStaleTestNetworks = async (): Promise<void> => {
  const listed = await dockerAt(undefined, [
    "network",
    "ls",
    "--filter",
    `name=${PREFIX}`,
    "--format",
    "{{.Name}}",
  ]).catch(() => ({ stdout: "" }));
  const stale = listed.stdout
    .split("\n")
    .map((n) => n.trim())
    .filter((n) => new RegExp(`^${PREFIX}\\d+$`).test(n) && !alive(Number(n.slice(PREFIX.length))));
  await Promise.all(stale.map((n) => removeNetwork(undefined, n)));
};
