import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:net";
import { sandboxesRepository } from "@tern/db";
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
// the engine has it, and the egress policy, through which its sandbox still clones from a git
// server on a private address (the network's gateway). And a worker that cannot contain its
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

  it("clones through the egress policy into a sandbox with a disk limit, which reaches nothing else on the host", async () => {
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
    const r = await driver.exec(row!.name, {
      cmd: [
        "bash",
        "-c",
        `cat /workspace/contained/README.md; for p in ${gitPort} ${portOf(otherPort)}; do ` +
          `timeout 3 bash -c "exec 3<>/dev/tcp/${gateway}/$p" 2>/dev/null && echo "$p open" || echo "$p closed"; done`,
      ],
    });
    expect(r.stdout).toContain("hello");
    expect(r.stdout).toContain(`${gitPort} open`);
    expect(r.stdout).toContain(`${portOf(otherPort)} closed`);
  });

  it("does not start when the engine lacks the runtime asked for, and names the variable", async () => {
    await expect(h.startWorker({ ...engineEnv(), SANDBOX_RUNTIME: "no-such-runtime" })).rejects.toThrow(
      /SANDBOX_RUNTIME: the Docker engine has no runtime 'no-such-runtime'.*or unset SANDBOX_RUNTIME/,
    );
  });
});
