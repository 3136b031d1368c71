import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxStateOf } from "../src/docker/driver.ts";
import { createDockerClient } from "../src/docker/engine.ts";
import {
  createSandboxDriver,
  dockerEngineFromEnv,
  type PreparedSandboxes,
  SANDBOX_STATE_DIR,
  SandboxLabel,
  type SandboxSpec,
} from "../src/index.ts";

const engine = dockerEngineFromEnv(process.env);
// Docker itself, to check what the driver asked of it.
const docker = createDockerClient(engine);
const namespace = `terntest-driver-${randomBytes(4).toString("hex")}`;
const image = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const network = process.env.SANDBOX_NETWORK ?? "tern-sandboxes";
const driver = createSandboxDriver({ driver: "docker", engine, network });

const spec = (name: string): SandboxSpec => ({
  name: `${namespace}-${name}`,
  image,
  labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace, [SandboxLabel.TaskId]: name },
  limits: { memoryMb: 256, cpus: 0.5, pids: 128 },
});

let id = "";
let prepared: PreparedSandboxes;

beforeAll(async () => {
  prepared = await driver.prepare();
  id = (await driver.create(spec("main"))).ref;
});

afterAll(async () => {
  for (const c of await driver.list({ [SandboxLabel.Namespace]: namespace })) await driver.destroy(c.ref);
  expect(await driver.list({ [SandboxLabel.Namespace]: namespace })).toEqual([]);
});

describe("docker sandbox driver", () => {
  it("prepares the sandboxes' own network and says where sandboxes reach this host", async () => {
    const net = await docker.getNetwork(network).inspect();
    expect(net.Options?.["com.docker.network.bridge.enable_icc"]).toBe("false");
    expect(prepared.hostAddress).toBe(net.IPAM?.Config?.[0]?.Gateway);
    expect(prepared.summary).toMatchObject({ driver: "docker", network });
    // Again: nothing new, same answer.
    expect(await driver.prepare()).toEqual(prepared);
  });

  it("runs hardened: non-root, no capabilities, no-new-privileges, limits, our network, no ports", async () => {
    const r = await driver.exec(id, {
      cmd: ["bash", "-c", "id -un; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status"],
    });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("agent\n");
    expect(r.stdout).toMatch(/CapEff:\s+0+\n/);
    expect(r.stdout).toMatch(/CapBnd:\s+0+\n/);
    expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
    const info = await docker.getContainer(id).inspect();
    expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024);
    expect(info.HostConfig.NanoCpus).toBe(5e8);
    expect(info.HostConfig.PidsLimit).toBe(128);
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([network]);
    expect(info.NetworkSettings.Ports ?? {}).toEqual({});
  });

  it("holds open files and processes to ulimits, by default and as a spec asks", async () => {
    const r = await driver.exec(id, { cmd: ["bash", "-c", "ulimit -Sn; ulimit -Hn; ulimit -Su; ulimit -Hu"] });
    expect(r.stdout.split("\n").slice(0, 4)).toEqual(["4096", "4096", "8192", "8192"]);
    const own = await driver.create({ ...spec("ulimits"), limits: { ...spec("x").limits, nofile: 256, nproc: 1000 } });
    const o = await driver.exec(own.ref, { cmd: ["bash", "-c", "ulimit -n; ulimit -u"] });
    expect(o.stdout).toBe("256\n1000\n");
    await driver.destroy(own.ref);
  });

  it("runs as uid 1000 even from an image whose USER is root", async () => {
    // The sandbox image with its USER taken away, as an operator's own SANDBOX_IMAGE might be.
    const base = await docker.createContainer({
      Image: image,
      Cmd: ["true"],
      Labels: { [SandboxLabel.Namespace]: namespace },
    });
    const rootImage = `${namespace}-rootimage:latest`;
    await base.commit({
      repo: `${namespace}-rootimage`,
      tag: "latest",
      changes: ["USER root", `CMD ["sleep", "infinity"]`],
    });
    await base.remove({ force: true });
    try {
      expect((await docker.getImage(rootImage).inspect()).Config.User).toBe("root");
      const c = await driver.create({ ...spec("rootimage"), image: rootImage });
      const r = await driver.exec(c.ref, { cmd: ["bash", "-c", "id -u; id -g"] });
      expect(r.stdout).toBe("1000\n1000\n");
      await driver.destroy(c.ref);
    } finally {
      await docker.getImage(rootImage).remove({ force: true });
    }
  });

  it("keeps the tools' state directory writable by the sandbox's user in a sandbox made from a committed one", async () => {
    // A repository snapshot and the empty-workspace image are commits of sandboxes: they hold the
    // state directory's mount point as root's 0755, and Docker gives the tmpfs that directory's mode.
    const made = await driver.commit?.(id, { baseImage: image, labels: { [SandboxLabel.Namespace]: namespace } });
    if (!made) throw new Error("the docker driver commits");
    try {
      const c = await driver.create({ ...spec("committed"), image: made.image });
      const r = await driver.exec(c.ref, {
        cmd: [
          "bash",
          "-c",
          `touch ${SANDBOX_STATE_DIR}/x && mkdir ${SANDBOX_STATE_DIR}/d && stat -c %U ${SANDBOX_STATE_DIR}`,
        ],
      });
      expect(r).toMatchObject({ exitCode: 0, stdout: "agent\n" });
      await driver.destroy(c.ref);
    } finally {
      await driver.removeImage?.(made.image);
    }
  });

  it("separates stdout and stderr, streams them, and returns the exit code", async () => {
    const seen: string[] = [];
    const r = await driver.exec(id, {
      cmd: ["bash", "-c", "echo out; echo err >&2; exit 3"],
      onOutput: (c, s) => seen.push(`${s}:${c}`),
    });
    expect(r).toMatchObject({ exitCode: 3, stdout: "out\n", stderr: "err\n", timedOut: false, truncated: false });
    expect(seen.sort()).toEqual(["stderr:err\n", "stdout:out\n"]);
  });

  it("passes cwd, env and stdin", async () => {
    const r = await driver.exec(id, {
      cmd: ["bash", "-c", 'pwd; echo "$GREETING"; cat'],
      cwd: "/tmp",
      env: { GREETING: "hi there" },
      stdin: "from stdin",
    });
    expect(r.stdout).toBe("/tmp\nhi there\nfrom stdin");
  });

  it("kills the whole process group when the time limit passes", async () => {
    const r = await driver.exec(id, {
      cmd: ["bash", "-c", "(sleep 300; echo child-survived) & echo started; sleep 300"],
      timeoutMs: 1000,
    });
    expect(r.timedOut).toBe(true);
    expect(r.stdout).toBe("started\n");
    const ps = await driver.exec(id, { cmd: ["bash", "-c", "ps -eo args | grep -c '[s]leep 300' || true"] });
    expect(ps.stdout.trim()).toBe("0");
  });

  it("caps the output it keeps", async () => {
    const r = await driver.exec(id, {
      cmd: ["bash", "-c", "head -c 100000 /dev/zero | tr '\\0' x"],
      maxOutputBytes: 1000,
    });
    expect(r.truncated).toBe(true);
    expect(r.stdout.length).toBeLessThan(1100);
  });

  it("uploads files owned by the sandbox user and downloads them", async () => {
    await driver.upload(id, "/workspace/up", [
      { path: "a.txt", content: "alpha" },
      { path: "deep/dir/b.sh", content: "#!/bin/sh\necho b\n", mode: 0o755 },
    ]);
    const r = await driver.exec(id, {
      cmd: ["bash", "-c", "stat -c '%U %a' /workspace/up/deep/dir/b.sh; /workspace/up/deep/dir/b.sh"],
    });
    expect(r.stdout).toBe("agent 755\nb\n");
    expect((await driver.download(id, "/workspace/up/a.txt"))?.toString()).toBe("alpha");
    expect(await driver.download(id, "/workspace/up/missing")).toBeNull();
    await expect(driver.upload(id, "/workspace/up", [{ path: "../escape", content: "x" }])).rejects.toThrow();
  });

  it("adopts the existing container when created again under the same name, even stopped", async () => {
    const again = await driver.create(spec("main"));
    expect(again.ref).toBe(id);
    const other = await driver.create(spec("stopped"));
    await docker.getContainer(other.ref).stop({ t: 0 });
    expect((await driver.inspect(other.ref))?.state).toBe("stopped");
    const adopted = await driver.create(spec("stopped"));
    expect(adopted).toMatchObject({ ref: other.ref, state: "running" });
  });

  it("pauses, resumes, lists by label and destroys (a missing container is fine)", async () => {
    await driver.pause(id);
    await driver.pause(id);
    expect((await driver.inspect(id))?.state).toBe("paused");
    await driver.resume(id);
    expect((await driver.inspect(id))?.state).toBe("running");
    // Resuming a running sandbox is no error either (Docker answers 500 "is not paused").
    await driver.resume(id);
    expect((await driver.inspect(id))?.state).toBe("running");
    const listed = await driver.list({ [SandboxLabel.Namespace]: namespace, [SandboxLabel.TaskId]: "main" });
    expect(listed.map((c) => c.ref)).toEqual([id]);
    // A name reaches the sandbox as its ref does.
    expect((await driver.inspect(`${namespace}-main`))?.ref).toBe(id);
    await driver.destroy(id);
    await driver.destroy(id);
    expect(await driver.inspect(id)).toBeNull();
  });
});

describe("Docker states in our words", () => {
  it("maps every Docker container state onto ours; none of Docker's own words leak", () => {
    const docker = ["created", "restarting", "running", "paused", "exited", "removing", "dead"];
    expect(Object.fromEntries(docker.map((s) => [s, sandboxStateOf(s)]))).toEqual({
      created: "starting",
      restarting: "starting",
      running: "running",
      paused: "paused",
      exited: "stopped",
      removing: "failed",
      dead: "failed",
    });
  });
});
