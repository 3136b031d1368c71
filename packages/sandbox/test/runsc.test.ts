import { randomBytes } from "node:crypto";
import { engineSandboxDriver, ensureTestEngine, scaled } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDockerProbe, type DockerProbe } from "../src/docker/index.ts";
import { type SandboxDriver, SandboxLabel, type SandboxSpec } from "../src/index.ts";

// gVisor as the sandboxes' runtime (SANDBOX_RUNTIME=runsc): the hardened container runs under it,
// and what a start pays for it, against runc, is said from one start of each (a figure for the
// log, not a speed check: speed is the bench's, and the suite's load makes one sample rough).

const ROUNDS = 1;

let driver: SandboxDriver;
let probe: DockerProbe;
let hasRunsc = false;
const namespace = `terntest-runsc-${randomBytes(4).toString("hex")}`;

const spec = (name: string, runtime: string): SandboxSpec => ({
  name: `${namespace}-${name}`,
  image: "tern-sandbox:latest",
  labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace },
  limits: { memoryMb: 512, cpus: 1, pids: 512, diskMb: 1024 },
  runtime,
});

/** From create to the first command's answer: what a start waits for. */
const timedStart = async (name: string, runtime: string) => {
  const started = performance.now();
  const { ref: id } = await driver.create(spec(name, runtime));
  const r = await driver.exec(id, { cmd: ["true"] });
  const ms = performance.now() - started;
  expect(r.exitCode).toBe(0);
  await driver.destroy(id);
  return ms;
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

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

describe("gVisor runtime", () => {
  it("runs the hardened sandbox under runsc, and says what a start costs against runc", {
    timeout: scaled(300_000),
  }, async (ctx) => {
    if (!hasRunsc) {
      console.info("skipped: the engine has no runsc runtime (ensure-engine.sh registers it with TERN_RUNSC=1)");
      ctx.skip();
    }
    const { ref: id } = await driver.create(spec("check", "runsc"));
    const r = await driver.exec(id, {
      // gVisor's /proc/self/status has no NoNewPrivs line: prctl(PR_GET_NO_NEW_PRIVS) asks it.
      cmd: [
        "bash",
        "-c",
        "dmesg | head -n 1; id -un; grep -E '^CapEff' /proc/self/status; " +
          `python3 -c 'import ctypes; print("NoNewPrivs:", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'`,
      ],
    });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("gVisor");
    expect(r.stdout).toContain("agent\n");
    expect(r.stdout).toMatch(/CapEff:\s+0+\n/);
    expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
    await driver.destroy(id);

    const runc: number[] = [];
    const runsc: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      runc.push(await timedStart(`runc-${i}`, "runc"));
      runsc.push(await timedStart(`runsc-${i}`, "runsc"));
    }
    console.info(
      `sandbox start (create, start, first exec), ${ROUNDS} round(s): runc median ${Math.round(median(runc))} ms, ` +
        `runsc median ${Math.round(median(runsc))} ms`,
    );
  });
});
