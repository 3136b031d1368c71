/**
 * Cold start's WAITING_FOR_SANDBOX against its floor (bench README, "Cold start"): the worker's
 * driver `create` (create, start, inspect, with the worker's default limits and ulimits) against
 * the floor's `startRaw` (create, start), interleaved on the same engine and network, each followed
 * by one exec and removed. What the driver adds is the part of the stage that is not the database.
 *
 *   node --import tsx bench/src/experiments/driver-create.mts [rounds]
 */
import { randomBytes } from "node:crypto";
import { dockerEngineFromEnv } from "@tern/sandbox";
import { createDockerProbe } from "@tern/sandbox/docker";
import { testSandboxDriver, testSandboxNetworkName } from "@tern/testing";
import { summarize } from "../stats.ts";

const rounds = Number(process.argv[2] ?? 30);
const image = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const network = testSandboxNetworkName();
const driver = testSandboxDriver();
await driver.prepare();
const probe = createDockerProbe(dockerEngineFromEnv(process.env));
const run = randomBytes(3).toString("hex");
const labels = { "tern.bench": run };
const limits = { memoryMb: 2048, cpus: 1, pids: 512 };

const times = { rawCreate: [] as number[], rawExec: [] as number[], create: [] as number[], exec: [] as number[] };
for (let i = 0; i < rounds; i++) {
  let t = performance.now();
  const raw = await probe.startRaw({ name: `tern-exp-raw-${run}-${i}`, image, labels, network, limits });
  times.rawCreate.push(performance.now() - t);
  t = performance.now();
  await raw.exec(["true"], { user: "agent" });
  times.rawExec.push(performance.now() - t);
  await raw.remove();

  t = performance.now();
  const info = await driver.create({
    name: `tern-exp-drv-${run}-${i}`,
    image,
    labels,
    limits: { ...limits, nofile: 4096, nproc: 8192 },
  });
  times.create.push(performance.now() - t);
  t = performance.now();
  await driver.exec(info.ref, { cmd: ["true"] });
  times.exec.push(performance.now() - t);
  await driver.destroy(info.ref);
}
for (const [name, samples] of Object.entries(times)) {
  const s = summarize(samples);
  console.log(`${name.padEnd(10)} p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  (n ${s.n})`);
}
