import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:net";
import { sandboxesRepository } from "@tern/db";
import { liveWorkers } from "@tern/queue";
import { type SandboxDriver, SandboxLabel } from "@tern/sandbox";
import { createDockerProbe, type DockerProbe, removeEgressPolicy } from "@tern/sandbox/docker";
import {
  engineSandboxDriver,
  ensureTestEngine,
  type GitServer,
  type ServiceProcess,
  scaled,
  startGitServer,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

// Root where root is safe: a real worker on an engine of its own with userns-remap
// (ensure-engine.sh with TERN_DOCKER_USERNS=1), every containment on. Its sandboxes' user has sudo,
// and root inside them still cannot reach the host's ports, change the egress rules or write past
// the disk limit.

/** An engine no other test file uses: it runs with userns-remap, which is chosen when it starts. */
const ENGINE_N = 33;
/** Effective capabilities of root in a sudo sandbox: CHOWN (0), DAC_OVERRIDE (1), FOWNER (3), SETGID (6), SETUID (7). */
const SUDO_CAP_EFF = (1n << 0n) | (1n << 1n) | (1n << 3n) | (1n << 6n) | (1n << 7n);

let h: StartHarness;
let host = "";
let driver: SandboxDriver;
let probe: DockerProbe;
let git: GitServer;
let worker: ServiceProcess;
let bridge = "";
let gateway = "";
let otherPort: Server;
let network = "";

const engineEnv = (): Record<string, string> => ({
  DOCKER_HOST: host,
  SANDBOX_NETWORK: network,
  GIT_BASE_URL: git.url,
  SANDBOX_DISK_MB: "1024",
  SANDBOX_DISK_ENFORCE: "true",
  SANDBOX_EGRESS: "public",
  SANDBOX_EGRESS_ENFORCE: "true",
  SANDBOX_SUDO: "auto",
});

const portOf = (s: Server) => (s.address() as { port: number }).port;
const egressRules = () => execFileSync("iptables", ["-S", `TERN-EGRESS-${bridge}`], { encoding: "utf8" });

beforeAll(
  async () => {
    host = await ensureTestEngine(ENGINE_N, { userns: true });
    h = await createStartHarness();
    network = `terntest-root-${h.prefix}`.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 60);
    driver = engineSandboxDriver(host, network);
    probe = createDockerProbe({ host });
    gateway = (await driver.prepare()).hostAddress ?? "";
    ({ bridge } = await probe.bridgeOf(network));
    git = await startGitServer({ host: gateway, token: h.gitToken });
    await git.createFixtureRepo("acme/rooted", {
      ".openhands/setup.sh": "#!/bin/bash\nset -e\nsudo true\nsudo touch /etc/tern-setup-was-root\necho rooted\n",
    });
    otherPort = createServer((s) => s.on("error", () => undefined).end("no\n")).listen(0, gateway);
    await once(otherPort, "listening");
    worker = await h.startWorker(engineEnv());
  },
  scaled(15 * 60_000),
);

afterAll(async () => {
  await worker?.stop();
  if (driver && h) {
    for (const s of await driver.list({ [SandboxLabel.Namespace]: h.prefix })) await driver.destroy(s.ref);
  }
  if (bridge) await removeEgressPolicy(bridge);
  await probe?.removeNetwork(network);
  otherPort?.close();
  await git?.close();
  await h?.close();
});

/** Runs `script` in the sandbox as its user (bash -c); stdout and stderr together. */
const sh = async (ref: string, script: string, timeoutMs = 60_000) => {
  const r = await driver.exec(ref, { cmd: ["bash", "-c", `exec 2>&1\n${script}`], timeoutMs });
  return { exitCode: r.exitCode, output: r.stdout };
};

describe("root in sandboxes on a userns-remap engine", () => {
  let sandbox = "";

  it("says sudo (userns-remap) in the start-up log, /ready and /metrics", async () => {
    const ready = await waitFor(
      () =>
        worker
          .output()
          .split("\n")
          .find((l) => l.includes('"msg":"worker ready"')),
      { what: "the worker's 'worker ready' log line", timeoutMs: 10_000 },
    );
    expect(JSON.parse(ready ?? "{}")).toMatchObject({ root: "sudo (userns-remap)" });
    const [endpoint] = await liveWorkers(h.redis, h.prefix);
    const body = (await (await fetch(`${endpoint?.url}/ready`)).json()) as { containment: { root: unknown } };
    expect(body.containment.root).toEqual({ mode: "sudo", safety: "userns-remap", forced: false });
    const metrics = await (await fetch(`${endpoint?.url}/metrics`)).text();
    expect(metrics).toMatch(/tern_sandbox_root_mode\{mode="sudo",safety="userns-remap",forced="false"\} 1/);
  });

  it(
    "runs a setup script's sudo, and root has exactly the install capabilities and only sudo is setuid",
    async () => {
      const { userId } = await h.newUser();
      const taskId = await h.enqueueDirect(userId, { selected_repository: "acme/rooted", git_provider: "github" });
      const { task } = await h.waitForTask(taskId, scaled(180_000));
      expect(task.detail, worker.output().slice(-4000)).toBeNull();
      expect(task.status).toBe("READY");
      sandbox = (await sandboxesRepository(h.database.db).findByTask(task.id))!.name;
      const info = await probe.inspect(sandbox);
      expect(info.HostConfig.CapAdd?.sort()).toEqual(["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"]);
      expect(info.HostConfig.SecurityOpt ?? []).not.toContain("no-new-privileges:true");

      const r = await sh(
        sandbox,
        `sudo true && echo sudo-ok; test -f /etc/tern-setup-was-root && echo setup-was-root
sudo awk '/^CapEff/ { print $2 }' /proc/self/status
find / -xdev -type f -perm /6000 2>/dev/null`,
      );
      const [ok, setupRoot, capEff, ...setuid] = r.output.trim().split("\n");
      expect([ok, setupRoot]).toEqual(["sudo-ok", "setup-was-root"]);
      expect(BigInt(`0x${capEff}`)).toBe(SUDO_CAP_EFF);
      expect(setuid).toEqual(["/usr/bin/sudo"]);
    },
    scaled(240_000),
  );

  it(
    "root inside cannot reach the host's ports, change the network or open raw sockets; the egress rules hold",
    async () => {
      expect(sandbox).not.toBe("");
      const before = egressRules();
      const gitPort = new URL(git.url).port;
      const r = await sh(
        sandbox,
        `sudo python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)' 2>&1 | tail -n 1
sudo sh -c 'echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter' 2>&1 | grep -o 'Read-only file system'
sudo python3 -c 'import fcntl, socket, struct; fcntl.ioctl(socket.socket(), 0x8914, struct.pack("16sH14s", b"eth0", 0, b""))' 2>&1 | tail -n 1
for p in ${gitPort} ${portOf(otherPort)}; do
  sudo timeout 3 bash -c "exec 3<>/dev/tcp/${gateway}/$p" 2>/dev/null && echo "$p open" || echo "$p closed"
done`,
      );
      const lines = r.output.trim().split("\n");
      expect(lines[0]).toMatch(/PermissionError: \[Errno 1\] Operation not permitted/);
      expect(lines[1]).toBe("Read-only file system");
      // SIOCSIFFLAGS (bringing eth0 down): NET_ADMIN, which root here lacks.
      expect(lines[2]).toMatch(/PermissionError: \[Errno 1\] Operation not permitted/);
      expect(lines.slice(3)).toEqual([`${gitPort} closed`, `${portOf(otherPort)} closed`]);
      expect(egressRules()).toBe(before);
    },
    scaled(120_000),
  );

  it(
    "root inside cannot write past the disk limit",
    async () => {
      expect(sandbox).not.toBe("");
      const r = await sh(
        sandbox,
        "sudo dd if=/dev/zero of=/fill bs=1M count=1536 status=none; echo rc=$?; sudo du -m /fill | cut -f1; sudo rm -f /fill",
        scaled(300_000),
      );
      const rc = /rc=(\d+)/.exec(r.output)?.[1];
      expect(rc, r.output).not.toBe("0");
      expect(r.output).toMatch(/No space left on device|Disk quota exceeded/);
      const written = Number(r.output.trim().split("\n").at(-1));
      expect(written).toBeLessThanOrEqual(1024);
    },
    scaled(360_000),
  );
});
