import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { ensureTestEngine, repoRoot, scaled, waitFor } from "@tern/testing";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);

/**
 * An engine whose processes died (a kill, or a reboot: /run is kept on this kind of machine) starts
 * again, whatever now holds the pids its files name. dockerd takes any live process named by its
 * exec root's containerd.pid for its containerd and exits after waiting for it; and it refuses a pid
 * file that names a live process. A CI run that started on such a machine lost the bench's second
 * engine this way. Engine 17 is this file's own: it is stopped for good here.
 */
const N = 17;
const pidFile = `/var/run/tern-docker-${N}.pid`;
const containerdPidFile = `/var/run/tern-docker-${N}/containerd/containerd.pid`;

const ensureEngine = () =>
  run("bash", ["scripts/lib/ensure-engine.sh", String(N)], { cwd: repoRoot, timeout: scaled(180_000) });

const gone = (pid: number) => {
  if (!existsSync(`/proc/${pid}`)) return true;
  // Killed but not yet reaped by init: as good as gone.
  return /^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
};

// Stands in for whatever took the dead processes' pids.
const bystander = spawn("sleep", ["3600"], { stdio: "ignore" });

afterAll(async () => {
  bystander.kill();
  await run("bash", ["scripts/lib/ensure-engine.sh", String(N), "stop"], { cwd: repoRoot });
});

describe("ensure-engine.sh after its engine died", () => {
  it("starts the engine although its pid files now name another live process", {
    timeout: scaled(420_000),
  }, async () => {
    const host = await ensureTestEngine(N);
    const dockerd = Number(readFileSync(pidFile, "utf8").trim());
    const containerd = Number(readFileSync(containerdPidFile, "utf8").trim());
    expect(dockerd).toBeGreaterThan(1);
    expect(containerd).toBeGreaterThan(1);

    // The engine dies as a session's end (or a power cut) kills it: nothing is cleaned up.
    process.kill(dockerd, "SIGKILL");
    process.kill(containerd, "SIGKILL");
    await waitFor(() => gone(dockerd) && gone(containerd), {
      what: "the engine's processes to die",
      timeoutMs: 30_000,
    });
    const other = bystander.pid as number;
    writeFileSync(pidFile, String(other));
    writeFileSync(containerdPidFile, String(other));

    const { stdout } = await ensureEngine();
    expect(stdout.trim()).toBe(host);
    const info = await run("docker", ["-H", host, "info", "--format", "{{.ServerVersion}}"]);
    expect(info.stdout.trim()).not.toBe("");
    // The bystander was left alone, and the engine's files name its own processes again.
    expect(bystander.exitCode).toBeNull();
    expect(Number(readFileSync(pidFile, "utf8").trim())).not.toBe(other);
  });
});
