import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

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
  /** Everything the process printed so far (stdout and stderr). */
  output: () => string;
  /** SIGTERM and wait for the exit; resolves to the exit code. */
  stop: () => Promise<number | null>;
  /** SIGKILL: a crash, nothing handed back. */
  kill: () => Promise<void>;
  exited: Promise<number | null>;
}

/** Spawns an app's main.ts (api, worker) with `env` on top of this process's environment. */
export const startService = async (
  app: "api" | "worker",
  env: Record<string, string>,
  opts: { waitFor?: RegExp; timeoutMs?: number } = {},
): Promise<ServiceProcess> => {
  const port = app === "api" ? (env.PORT ?? String(await freePort())) : "0";
  const child = spawn(process.execPath, ["--import", "tsx", `apps/${app}/src/main.ts`], {
    cwd: repoRoot,
    env: { ...process.env, LOG_LEVEL: "info", ...env, PORT: port, HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const waitFor = opts.waitFor ?? (app === "api" ? /"msg":"api listening"/ : /"msg":"worker ready"/);
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let done = false;
  exited.then(() => {
    done = true;
  });
  while (!waitFor.test(out)) {
    if (done) throw new Error(`${app} exited before it was ready:\n${out}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${app} was not ready in time:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    child,
    pid: child.pid ?? 0,
    url,
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
