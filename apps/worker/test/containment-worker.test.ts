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
  startGitServer,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

// A real worker on an engine of its own with every containment on: the disk limit, gVisor when
// the engine has it, and the egress policy. Its sandbox gets a clone from a git server on a
// private address (the network's gateway) that the sandbox itself cannot reach in public mode (the
// worker clones); in allowlist mode the git host is reachable, and a name that does not resolve
// leaves the worker running with the rest of the policy. A worker that cannot contain its
// sandboxes does not start.

let h: StartHarness;
let host = "";
let driver: SandboxDriver;
let probe: DockerProbe;
let git: GitServer;
let worker: ServiceProcess;
let bridge = "";
let gateway = "";
let otherPort: Server;
let runtime: string | undefined;
let network = "";

const engineEnv = (): Record<string, string> => ({
  DOCKER_HOST: host,
  SANDBOX_NETWORK: network,
  GIT_BASE_URL: git.url,
  SANDBOX_DISK_MB: "1024",
  SANDBOX_DISK_ENFORCE: "true",
  SANDBOX_EGRESS: "public",
  SANDBOX_EGRESS_ENFORCE: "true",
  ...(runtime ? { SANDBOX_RUNTIME: runtime } : {}),
});

const portOf = (s: Server) => (s.address() as { port: number }).port;

beforeAll(async () => {
  host = await ensureTestEngine(2);
  h = await createStartHarness();
  network = `terntest-${h.prefix}`.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 60);
  driver = engineSandboxDriver(host, network);
  probe = createDockerProbe({ host });
  gateway = (await driver.prepare()).hostAddress ?? "";
  ({ bridge } = await probe.bridgeOf(network));
  git = await startGitServer({ host: gateway, token: h.gitToken });
  await git.createFixtureRepo("acme/contained", { "README.md": "hello\n" });
  otherPort = createServer((s) => s.on("error", () => undefined).end("no\n")).listen(0, gateway);
  await once(otherPort, "listening");
  runtime = (await probe.runtimes()).includes("runsc") ? "runsc" : undefined;
  if (!runtime) console.info("runsc is not registered on the test engine: the start runs under runc");
  worker = await h.startWorker(engineEnv());
}, 15 * 60_000);

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

describe("a worker with its sandboxes contained", () => {
  it("says at start what holds its sandboxes", async () => {
    // The log line and the IPC "ready" travel on different pipes: the line may arrive just after.
    const ready = await waitFor(
      () =>
        worker
          .output()
          .split("\n")
          .find((l) => l.includes('"msg":"worker ready"')),
      { what: "the worker's 'worker ready' log line", timeoutMs: 10_000 },
    );
    expect(JSON.parse(ready ?? "{}")).toMatchObject({
      disk: expect.stringContaining("1024 MB"),
      egress: `public on ${bridge}`,
      ...(runtime ? { runtime } : {}),
    });
  });

  it("clones into a sandbox with a disk limit, which reaches nothing on the host, not even the git host", async () => {
    const { userId } = await h.newUser();
    const started = performance.now();
    const taskId = await h.enqueueDirect(userId, { selected_repository: "acme/contained", git_provider: "github" });
    const { task } = await h.waitForTask(taskId, 120_000);
    expect(task.detail).toBeNull();
    expect(task.status).toBe("READY");
    console.info(
      `a start with a clone under ${runtime ?? "runc"}, every containment on: ${Math.round(performance.now() - started)} ms`,
    );

    const row = await sandboxesRepository(h.database.db).findByTask(task.id);
    const info = await probe.inspect(row!.name);
    expect(info.HostConfig.StorageOpt).toEqual({ size: "1024M" });
    if (runtime) expect(info.HostConfig.Runtime).toBe(runtime);
    expect(execFileSync("iptables", ["-S", "DOCKER-USER"], { encoding: "utf8" })).toContain(
      `-A DOCKER-USER -i ${bridge} -j TERN-EGRESS-${bridge}`,
    );

    const gitPort = new URL(git.url).port;
    // One probe for every address: a connect within 3 s is "open", anything else "closed".
    const probeLine = (address: string, port: string) =>
      `timeout 3 bash -c "exec 3<>/dev/tcp/${address}/${port}" 2>/dev/null && echo "${address}:${port} open" || echo "${address}:${port} closed"`;
    const r = await driver.exec(row!.name, {
      cmd: [
        "bash",
        "-c",
        [
          "cat /workspace/contained/README.md",
          // The positive control: a port the sandbox does reach, its own listener, once it listens
          // (the listener writes its port when it is bound and listening).
          `python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' > /tmp/listening &`,
          "until test -s /tmp/listening; do sleep 0.05; done",
          probeLine("127.0.0.1", "$(cat /tmp/listening)"),
          probeLine(gateway, gitPort),
          probeLine(gateway, String(portOf(otherPort))),
          "kill %1",
        ].join("\n"),
      ],
    });
    expect(r.stdout).toContain("hello");
    // The probe can say "open": the closed answers below are the policy's, not a probe that fails.
    expect(r.stdout).toMatch(/^127\.0\.0\.1:\d+ open$/m);
    // Public mode: the git hosts get no rule (the worker cloned), and this one is on a private range.
    expect(r.stdout).toContain(`${gateway}:${gitPort} closed`);
    expect(r.stdout).toContain(`${gateway}:${portOf(otherPort)} closed`);
  });

  it("starts in allowlist mode with a name that does not resolve, installs the rest, and names it in /ready", async () => {
    await worker.stop();
    worker = await h.startWorker({
      ...engineEnv(),
      SANDBOX_EGRESS: "allowlist",
      SANDBOX_EGRESS_ALLOW: "git-mirror.example.invalid",
    });
    const rules = execFileSync("iptables", ["-S", `TERN-EGRESS-${bridge}`], { encoding: "utf8" });
    // The rest of the policy: the git host (an address here) is reachable, all else refused.
    expect(rules).toContain(`-d ${gateway}/32 -p tcp -m tcp --dport ${new URL(git.url).port} -j RETURN`);
    expect(rules).toMatch(/-j REJECT --reject-with icmp-admin-prohibited/);
    const [endpoint] = await liveWorkers(h.redis, h.prefix);
    expect(endpoint?.egressUnresolved).toEqual(["git-mirror.example.invalid"]);
    const ready = (await (await fetch(`${endpoint?.url}/ready`)).json()) as {
      status: string;
      containment: { egress: { mode: string; unresolved: { name: string; reason: string }[] } };
    };
    expect(ready.status).toBe("ok");
    expect(ready.containment.egress).toMatchObject({
      mode: "allowlist",
      unresolved: [{ name: "git-mirror.example.invalid", reason: expect.any(String) }],
    });
    expect(worker.output()).toMatch(/egress name does not resolve/);
  }, 120_000);

  it("does not start when the engine lacks the runtime asked for, and names the variable", async () => {
    await expect(h.startWorker({ ...engineEnv(), SANDBOX_RUNTIME: "no-such-runtime" })).rejects.toThrow(
      /SANDBOX_RUNTIME: the Docker engine has no runtime 'no-such-runtime'.*or unset SANDBOX_RUNTIME/,
    );
  });
});
