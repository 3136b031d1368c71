import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { scaled } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packFiles } from "../src/docker/archive.ts";
import { createDockerClient } from "../src/docker/engine.ts";
import { createSandboxDriver, dockerEngineFromEnv, SandboxLabel, type SandboxSpec } from "../src/index.ts";

/**
 * A fork bomb and a memory bomb, each in a sandbox of its own: the pid and memory limits hold,
 * the bomb's sandbox survives its own abuse, and a neighbour sandbox and this host keep working.
 * The neighbour's command latency (a bounded number of `true` execs) is measured quiet and under
 * each bomb; the figures are printed for the record.
 */

const engine = dockerEngineFromEnv(process.env);
const docker = createDockerClient(engine);
const namespace = `terntest-bombs-${randomBytes(4).toString("hex")}`;
const image = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const network = process.env.SANDBOX_NETWORK ?? "tern-sandboxes";
const driver = createSandboxDriver({ driver: "docker", engine, network });

const PIDS = 128;
const MEMORY_MB = 256;
const SAMPLES = 30;
const BOMB_SECONDS = 60;

const spec = (name: string): SandboxSpec => ({
  name: `${namespace}-${name}`,
  image,
  labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace, [SandboxLabel.TaskId]: name },
  limits: { memoryMb: MEMORY_MB, cpus: 0.5, pids: PIDS },
});

let neighbour = "";
const figures: Record<string, { p50: number; p99: number; max: number }> = {};

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

/** The neighbour's latency over SAMPLES `true` execs, one after the other; each must succeed. */
const measure = async (label: string) => {
  const ms: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    const r = await driver.exec(neighbour, { cmd: ["true"], timeoutMs: 30_000 });
    ms.push(performance.now() - started);
    expect(r.exitCode, `${label}: the neighbour's exec ${i}`).toBe(0);
  }
  ms.sort((a, b) => a - b);
  figures[label] = { p50: percentile(ms, 50), p99: percentile(ms, 99), max: ms[ms.length - 1] ?? Number.NaN };
  return figures[label];
};

const hostStillWorks = async () => {
  const { stdout } = await promisify(execFile)("sh", ["-c", "echo host-ok"], { timeout: 10_000 });
  expect(stdout).toBe("host-ok\n");
};

/** Polls `probe` until it says yes; no fixed sleeps. */
const until = async (what: string, probe: () => Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

/**
 * Where a bomb looks for its stop: written from outside with the engine's archive API, which needs no
 * process in the sandbox (a fork bomb has taken every pid an exec would need).
 */
const STOP_FILE = "/home/agent/.stop-bomb";
const stopBomb = async (ref: string) => {
  const archive = await packFiles([{ path: ".stop-bomb", content: "" }], { uid: 1000, gid: 1000 });
  await docker.getContainer(ref).putArchive(archive, { path: "/home/agent" });
};

/** The container's start (a restart changes it) and whether it was ever OOM-killed as a whole. */
const lifeOf = async (ref: string) => {
  const { State, RestartCount } = await docker.getContainer(ref).inspect();
  return { running: State.Running, startedAt: State.StartedAt, oomKilled: State.OOMKilled, restarts: RestartCount };
};

/**
 * The bomb's own sandbox survived its abuse: the same container, never restarted nor killed whole,
 * runs a command again once its bomb has stopped (every pid the bomb held is back: reaped, not leaked).
 */
const expectSurvived = async (ref: string, before: Awaited<ReturnType<typeof lifeOf>>) => {
  await until(
    "the bomb's processes to be gone",
    async () => ((await statsOf(ref)).pids_stats?.current ?? PIDS) <= 8,
    scaled(60_000),
  );
  const r = await driver.exec(ref, {
    cmd: ["bash", "-c", "echo alive; ls /proc | grep -c '^[0-9]'"],
    timeoutMs: 30_000,
  });
  expect({ exitCode: r.exitCode, alive: r.stdout.split("\n")[0] }).toEqual({ exitCode: 0, alive: "alive" });
  expect(await lifeOf(ref)).toEqual({ ...before, running: true, oomKilled: false, restarts: 0 });
};

const statsOf = async (ref: string) =>
  (await docker.getContainer(ref).stats({ stream: false })) as {
    pids_stats?: { current?: number };
    memory_stats?: { usage?: number; max_usage?: number; limit?: number };
  };

beforeAll(async () => {
  await driver.prepare();
  neighbour = (await driver.create(spec("neighbour"))).ref;
  await measure("quiet");
}, scaled(120_000));

afterAll(async () => {
  for (const c of await driver.list({ [SandboxLabel.Namespace]: namespace })) await driver.destroy(c.ref);
  console.log(
    `neighbour latency (ms, ${SAMPLES} execs of true): ${Object.entries(figures)
      .map(([k, f]) => `${k} p50 ${f.p50.toFixed(0)} p99 ${f.p99.toFixed(0)} max ${f.max.toFixed(0)}`)
      .join("; ")}`,
  );
}, scaled(120_000));

describe("abuse inside one sandbox stays inside it", () => {
  it("holds a fork bomb at the pid limit; the neighbour and the host keep working", {
    timeout: scaled(180_000),
  }, async () => {
    const bomb = (await driver.create(spec("forkbomb"))).ref;
    const before = await lifeOf(bomb);
    // Bash builtins only between forks, so it can see its stop.
    const forkBomb = `b() { [ -e ${STOP_FILE} ] && return; b | b & }; b; sleep infinity`;
    const running = driver
      .exec(bomb, { cmd: ["bash", "-c", forkBomb], timeoutMs: BOMB_SECONDS * 1000 })
      .catch(() => undefined);
    try {
      // The bomb has filled its sandbox: every pid it may have is taken.
      await until(
        "the fork bomb reaching the pid limit",
        async () => ((await statsOf(bomb)).pids_stats?.current ?? 0) >= PIDS - 2,
      );
      const during = await measure("fork bomb");
      await hostStillWorks();
      const pids = (await statsOf(bomb)).pids_stats?.current ?? 0;
      expect(pids).toBeLessThanOrEqual(PIDS);
      // Sanity bound, not a benchmark: the neighbour is not starved.
      expect(during.p99).toBeLessThan(10_000);
      await stopBomb(bomb);
      await expectSurvived(bomb, before);
    } finally {
      await driver.destroy(bomb);
      await running;
    }
  });

  it("holds a memory bomb at the memory limit, killing only the bomb; the neighbour and the host keep working", {
    timeout: scaled(180_000),
  }, async () => {
    const bomb = (await driver.create(spec("membomb"))).ref;
    const before = await lifeOf(bomb);
    const grow = "a = []\nwhile True: a.append(bytearray(16 * 1024 * 1024))";
    // Once: the kernel kills it at the limit (137), not the sandbox.
    const once = await driver.exec(bomb, { cmd: ["python3", "-c", grow], timeoutMs: 60_000 });
    expect(once.exitCode).toBe(137);
    expect((await driver.inspect(bomb))?.state).toBe("running");
    // Then again and again while the neighbour is measured. Each kill is counted: the kernel kills
    // the bomb only at the limit, so two kills say it is at work (a sample of its usage may fall
    // between a kill and the next growth, more so on a loaded machine).
    const running = driver
      .exec(bomb, {
        cmd: [
          "bash",
          "-c",
          `while [ ! -e ${STOP_FILE} ]; do python3 -c '${grow}'; echo killed >> /tmp/bomb-kills; done`,
        ],
        timeoutMs: BOMB_SECONDS * 1000,
      })
      .catch(() => undefined);
    try {
      await until(
        "the memory bomb killed at the limit twice",
        async () => {
          const kills = await driver.exec(bomb, { cmd: ["sh", "-c", "cat /tmp/bomb-kills 2>/dev/null | wc -l"] });
          return Number(kills.stdout.trim()) >= 2;
        },
        scaled(60_000),
      );
      const during = await measure("memory bomb");
      await hostStillWorks();
      const m = (await statsOf(bomb)).memory_stats;
      expect(m?.limit).toBe(MEMORY_MB * 1024 * 1024);
      expect(m?.usage ?? 0).toBeLessThanOrEqual(MEMORY_MB * 1024 * 1024);
      expect(during.p99).toBeLessThan(10_000);
      await stopBomb(bomb);
      await running;
      await expectSurvived(bomb, before);
    } finally {
      await driver.destroy(bomb);
      await running;
    }
  });
});
