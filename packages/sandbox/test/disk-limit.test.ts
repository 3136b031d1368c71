import { randomBytes } from "node:crypto";
import { statfs } from "node:fs/promises";
import { engineSandboxDriver, ensureTestEngine, scaled } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDockerProbe, type DockerProbe } from "../src/docker/index.ts";
import { type SandboxDriver, SandboxLabel, type SandboxSpec } from "../src/index.ts";

// A disk fill in one sandbox stops at its limit, on an engine whose data root holds one
// (ensure-engine.sh: XFS with pquota, or btrfs), and a neighbour sandbox keeps working: its
// command latency is measured quiet and during the fill.

/** Above the sandbox image's own 718 MB: on a btrfs data root the image's files count against the limit. */
const DISK_MB = 1024;
const SAMPLES = 40;
const DATA_ROOT = "/var/lib/tern-docker-2";

let driver: SandboxDriver;
let probe: DockerProbe;
let hasRunsc = false;
const namespace = `terntest-disk-${randomBytes(4).toString("hex")}`;

const spec = (name: string, extra: Partial<SandboxSpec> = {}): SandboxSpec => ({
  name: `${namespace}-${name}`,
  image: "tern-sandbox:latest",
  labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace },
  limits: { memoryMb: 512, cpus: 1, pids: 512, diskMb: DISK_MB },
  ...extra,
});

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;

/** `true` run SAMPLES times in turn; every run must succeed. */
const latencies = async (id: string) => {
  const ms: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    const r = await driver.exec(id, { cmd: ["true"] });
    ms.push(performance.now() - started);
    expect(r.exitCode).toBe(0);
  }
  ms.sort((a, b) => a - b);
  return { p50: Math.round(percentile(ms, 0.5)), p99: Math.round(percentile(ms, 0.99)) };
};

/** Writes until the filesystem says no; dd says how far it got and why it stopped. */
/** Asks for 12 GiB, far past the limit: the engine stops it there. */
const FILL = "dd if=/dev/zero of=/workspace/fill bs=1M count=12288 2>&1";

const fillOnce = async (id: string) => {
  const r = await driver.exec(id, { cmd: ["bash", "-c", FILL], timeoutMs: 120_000 });
  const size = Number(r.stdout.match(/^(\d+) bytes/m)?.[1] ?? -1);
  return { size, output: r.stdout };
};

beforeAll(async () => {
  const host = await ensureTestEngine(2);
  driver = engineSandboxDriver(host, namespace);
  probe = createDockerProbe({ host });
  hasRunsc = (await probe.runtimes()).includes("runsc");
  await driver.prepare();
}, 15 * 60_000);

afterAll(async () => {
  for (const c of await driver.list({ [SandboxLabel.Namespace]: namespace })) await driver.destroy(c.ref);
  await probe.removeNetwork(namespace);
});

describe("sandbox disk limit", () => {
  it("is something this engine can hold", async () => {
    const support = await probe.diskLimit("tern-sandbox:latest", DISK_MB);
    expect(support).toMatchObject({ supported: true });
  });

  it("stops a fill at the limit while a neighbour keeps working, and the engine keeps its space", {
    timeout: scaled(300_000),
  }, async () => {
    const filler = (await driver.create(spec("filler"))).ref;
    const neighbour = (await driver.create(spec("neighbour"))).ref;

    const fallocate = await driver.exec(filler, { cmd: ["fallocate", "-l", `${DISK_MB * 2}M`, "/workspace/big"] });
    expect(fallocate.exitCode).not.toBe(0);
    expect(fallocate.stderr).toMatch(/quota|space/i);

    const first = await fillOnce(filler);
    expect(first.output).toMatch(/quota|space/i);
    expect(first.size).toBeGreaterThan(0);
    expect(first.size).toBeLessThanOrEqual(DISK_MB * 1024 * 1024);

    const quiet = await latencies(neighbour);
    // A fill that never ends: write to the limit, delete, again, for as long as the neighbour is measured.
    await driver.exec(filler, {
      cmd: [
        "bash",
        "-c",
        `rm -f /workspace/fill; nohup bash -c 'while :; do ${FILL} >/dev/null; rm -f /workspace/fill; done' >/dev/null 2>&1 &`,
      ],
    });
    const during = await latencies(neighbour);
    const write = await driver.exec(neighbour, {
      cmd: ["bash", "-c", "dd if=/dev/zero of=/workspace/mine bs=1M count=32 conv=fsync 2>&1 | tail -n 1"],
      timeoutMs: 60_000,
    });
    expect(write.exitCode).toBe(0);
    const root = await statfs(DATA_ROOT);
    const freeMb = Math.round((root.bavail * root.bsize) / 1024 / 1024);
    // The engine's filesystem keeps room: a sandbox can take its limit, never the rest.
    expect(freeMb).toBeGreaterThan(1024);

    console.info(
      `disk fill stopped at ${(first.size / 1024 / 1024).toFixed(1)} MiB of a ${DISK_MB} MB limit ` +
        `(${first.output
          .split("\n")
          .find((l) => /quota|space/i.test(l))
          ?.trim()}); ` +
        `neighbour \`true\` latency over ${SAMPLES} execs: quiet p50 ${quiet.p50} ms / p99 ${quiet.p99} ms, ` +
        `during the fill p50 ${during.p50} ms / p99 ${during.p99} ms; data root free ${freeMb} MB`,
    );
    // Slower under load on two shared cores, but working and bounded.
    expect(during.p99).toBeLessThan(10_000);
    await driver.destroy(filler);
  });

  it("holds a gVisor (runsc) sandbox too", { timeout: scaled(300_000) }, async (ctx) => {
    if (!hasRunsc) {
      console.info("skipped: the engine has no runsc runtime");
      ctx.skip();
    }
    const id = (await driver.create(spec("gvisor", { runtime: "runsc" }))).ref;
    const fill = await fillOnce(id);
    expect(fill.output).toMatch(/quota|space/i);
    expect(fill.size).toBeGreaterThan(0);
    expect(fill.size).toBeLessThanOrEqual(DISK_MB * 1024 * 1024);
    console.info(`disk fill under runsc stopped at ${(fill.size / 1024 / 1024).toFixed(1)} MiB`);
  });
});
