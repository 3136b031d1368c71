import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { testSecretsKey } from "./secret-box.ts";
import { testSandboxNetworkName } from "./test-networks.ts";
import { scaled } from "./time-scale.ts";

export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

export const freePort = async (): Promise<number> => {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  server.close();
  await once(server, "close");
  return port;
};

export interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  /** Base URL, for the API. */
  url: string;
  /** What the process printed so far (stdout and stderr; the last few MiB). Complete once `exited`. */
  output: () => string;
  /** SIGTERM and wait for the exit; resolves to the exit code. */
  stop: () => Promise<number | null>;
  /** SIGKILL: a crash, nothing handed back. */
  kill: () => Promise<void>;
  /** Resolves to the exit code once the process is gone and its output read to the end. */
  exited: Promise<number | null>;
}

/**
 * Workers in tests run on the main engine, on their test file's own sandbox network (test-networks.ts),
 * with no egress rules and no disk limit (watched mode would sample every sandbox of the file): the
 * containment tests prove both, each on the engine it needs, with both on.
 */
export const containmentOptOut = { SANDBOX_DISK_ENFORCE: "false", SANDBOX_EGRESS_ENFORCE: "false" } as const;

/** Output kept per process: a long-running API logs a line per request (the bench sends thousands). */
const MAX_OUTPUT_CHARS = 4 * 1024 * 1024;

/**
 * The node arguments that run an app's entry point: compiled JavaScript, as production runs it
 * (`--conditions=tern-dist`), built by the test run's global set-up (global-setup.ts) or the bench
 * (scripts/build.mjs rewrites only what changed). Ready in about half the time of the source through
 * tsx, which compiles every file at each start.
 */
export const appEntry = (app: "api" | "worker" | "cli"): string[] => [
  "--conditions=tern-dist",
  "--enable-source-maps",
  `apps/${app}/dist/main.js`,
];

/**
 * Spawns an app's main (api, worker) with `env` on top of this process's environment, and
 * returns once it is ready: its runtime sends "ready" over the IPC channel when its start is
 * done (a state, not a log line to look for).
 */
export const startService = async (
  app: "api" | "worker",
  env: Record<string, string>,
  opts: { timeoutMs?: number } = {},
): Promise<ServiceProcess> => {
  const port = app === "api" ? (env.PORT ?? String(await freePort())) : "0";
  // Workers' own HTTP servers on any free loopback port: several run at once, and the API finds them in Redis.
  const workerHttp = app === "worker" ? { WORKER_HTTP_PORT: "0", WORKER_HTTP_HOST: "127.0.0.1" } : {};
  const child = spawn(process.execPath, appEntry(app), {
    cwd: repoRoot,
    env: {
      ...process.env,
      LOG_LEVEL: "info",
      SECRETS_KEY: testSecretsKey,
      ...workerHttp,
      ...(app === "worker" ? { ...containmentOptOut, SANDBOX_NETWORK: testSandboxNetworkName() } : {}),
      ...env,
      PORT: port,
      HOST: "127.0.0.1",
    },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  let out = "";
  const append = (d: Buffer) => {
    out += d;
    if (out.length > MAX_OUTPUT_CHARS) out = out.slice(-MAX_OUTPUT_CHARS / 2);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  // "close", not "exit": it comes once stdout and stderr are read to the end.
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  const ready = new Promise<void>((resolve) => {
    child.on("message", (message) => {
      if (message === "ready") resolve();
    });
  });
  const timeoutMs = scaled(opts.timeoutMs ?? 30_000);
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    ready.then(() => "ready" as const),
    exited.then(() => "exited" as const),
    new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  if (outcome === "exited") throw new Error(`${app} exited before it was ready:\n${out}`);
  if (outcome === "late") {
    child.kill("SIGKILL");
    await exited;
    throw new Error(`${app} was not ready within ${timeoutMs} ms:\n${out}`);
  }
  return {
    child,
    pid: child.pid ?? 0,
    url: `http://127.0.0.1:${port}`,
    output: () => out,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
};
