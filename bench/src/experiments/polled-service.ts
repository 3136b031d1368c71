import { spawn } from "node:child_process";
import { once } from "node:events";
import { repoRoot, type ServiceProcess } from "@tern/testing";

/**
 * An experiment's server: node with `args` on `port`, polled every 50 ms until `isUp` answers
 * true for its base URL (a refused connection counts as not yet). Only what the bench's rows use
 * of a ServiceProcess (url, pid, stop) is there.
 */
export const spawnPolledService = async (
  port: number,
  args: string[],
  env: NodeJS.ProcessEnv,
  isUp: (url: string) => Promise<boolean>,
): Promise<ServiceProcess> => {
  const child = spawn(process.execPath, args, { cwd: repoRoot, env, stdio: ["ignore", "ignore", "inherit"] });
  const exited = once(child, "exit");
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    try {
      if (await isUp(url)) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    pid: child.pid ?? 0,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
      return 0;
    },
  } as unknown as ServiceProcess;
};
