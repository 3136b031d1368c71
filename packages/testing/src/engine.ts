import { execFile } from "node:child_process";
import { createSandboxDriver, type SandboxContainment, type SandboxDriver } from "@tern/sandbox";
import { repoRoot } from "./processes.ts";
import { noteTestEngine } from "./test-networks.ts";

const started = new Map<number, Promise<string>>();

/**
 * Docker engine `n` (2..54) beside the main one, started by scripts/lib/ensure-engine.sh when it
 * is not running: its data root can hold a disk limit, it has its own bridge and address pool,
 * gVisor (runsc) registered (or, with `userns`, userns-remap instead), and the sandbox image. Resolves to its DOCKER_HOST. The script locks,
 * so test files may ask at once; the first start (packages, loop file, image copy) takes a while.
 */
export const ensureTestEngine = (n = 2, opts: { userns?: boolean } = {}): Promise<string> => {
  let host = started.get(n);
  if (!host) {
    // With userns-remap (a sandbox's root is an unprivileged host uid) for `userns`, and no runsc there.
    const env = opts.userns ? { TERN_DOCKER_USERNS: "1" } : { TERN_RUNSC: "1" };
    host = new Promise<string>((resolve, reject) => {
      execFile(
        "bash",
        ["scripts/lib/ensure-engine.sh", String(n)],
        { cwd: repoRoot, env: { ...process.env, ...env }, timeout: 15 * 60_000 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`ensure-engine.sh ${n} failed: ${err.message}\n${stderr}`));
          else resolve(stdout.trim().split("\n").pop() ?? "");
        },
      );
    });
    started.set(n, host);
    noteTestEngine(host);
  }
  return host;
};

/** A driver of the engine at `host`, its sandboxes on `network`, held in as `containment` says. */
export const engineSandboxDriver = (host: string, network: string, containment?: SandboxContainment): SandboxDriver =>
  createSandboxDriver({ driver: "docker", engine: { host }, network, ...(containment ? { containment } : {}) });
