/**
 * Whether a sandbox made from a repository snapshot's image costs what one made from the sandbox
 * image costs (bench README, `ready.repo_snapshot`): two snapshots are committed as the worker commits
 * them (the driver's `commit`), one with a small repository set up (as the bench's) and one with
 * 50 MB in 2,000 files more (a dependency install), then create + start from each of the three images
 * is timed, interleaved in rotating order on the same engine and network, through the raw floor
 * (`startRaw`) and through the worker's driver (`create`). Each container is removed at once.
 *
 *   node --import tsx bench/src/experiments/snapshot-create.mts [rounds]
 */
import { randomBytes } from "node:crypto";
import { dockerEngineFromEnv } from "@tern/sandbox";
import { createDockerProbe } from "@tern/sandbox/docker";
import { testSandboxDriver, testSandboxNetworkName } from "@tern/testing";
import { summarize } from "../stats.ts";

const rounds = Number(process.argv[2] ?? 20);
const base = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const network = testSandboxNetworkName();
const driver = testSandboxDriver();
await driver.prepare();
const probe = createDockerProbe(dockerEngineFromEnv(process.env));
const run = randomBytes(3).toString("hex");
const labels = { "tern.bench": run };
const limits = { memoryMb: 2048, cpus: 1, pids: 512 };

const SMALL = `set -e
mkdir -p /workspace/app/src /workspace/app/.openhands/skills && cd /workspace/app
git init -q && echo "print('hello')" > src/app.py && printf '#!/bin/sh\\ngit diff --cached --check\\n' > .openhands/pre-commit.sh
echo 'Run the tests.' > .openhands/skills/testing.md && git add -A && git -c user.name=b -c user.email=b@b commit -qm init
cp .openhands/pre-commit.sh .git/hooks/pre-commit && echo installing > /tmp/setup.log && ls -la >> /tmp/setup.log`;
const LARGE = `${SMALL}
mkdir -p node_modules && for i in $(seq 1 2000); do head -c 25600 /dev/urandom > node_modules/f$i.bin; done`;

const snapshotOf = async (name: string, script: string): Promise<string> => {
  const info = await driver.create({ name: `tern-exp-snapsrc-${run}-${name}`, image: base, labels, limits });
  const r = await driver.exec(info.ref, { cmd: ["bash", "-c", script] });
  if (r.exitCode !== 0) throw new Error(`${name}: ${r.stderr}`);
  const made = await driver.commit!(info.ref, { baseImage: base, labels: { "tern.bench": run } });
  await driver.destroy(info.ref);
  console.log(`snapshot ${name}: ${(made.bytes / 1e6).toFixed(1)} MB over the base image`);
  return made.image;
};

const images = { base, small: await snapshotOf("small", SMALL), large: await snapshotOf("large", LARGE) };
const kinds = Object.keys(images) as (keyof typeof images)[];
const raw: Record<string, number[]> = { base: [], small: [], large: [] };
const drv: Record<string, number[]> = { base: [], small: [], large: [] };
const firstUse: Record<string, number> = {};
try {
  for (let i = 0; i < rounds; i++) {
    // Rotating order: none is always first after a removal.
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[(i + k) % kinds.length]!;
      const image = images[kind];
      let t = performance.now();
      const c = await probe.startRaw({ name: `tern-exp-raw-${run}-${kind}-${i}`, image, labels, network, limits });
      const rawMs = performance.now() - t;
      if (!(kind in firstUse)) firstUse[kind] = rawMs;
      else raw[kind]!.push(rawMs);
      await c.remove();
      t = performance.now();
      const info = await driver.create({ name: `tern-exp-drv-${run}-${kind}-${i}`, image, labels, limits });
      drv[kind]!.push(performance.now() - t);
      await driver.destroy(info.ref);
    }
  }
} finally {
  for (const image of [images.small, images.large]) await driver.removeImage!(image);
}
const line = (what: string, samples: Record<string, number[]>) => {
  const base50 = summarize(samples.base!).p50;
  for (const kind of kinds) {
    const s = summarize(samples[kind]!);
    console.log(
      `${what} ${kind.padEnd(5)} p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  (n ${s.n})  ${(s.p50 / base50).toFixed(3)} × base`,
    );
  }
};
console.log(
  `first create+start from each image (raw): ${kinds.map((k) => `${k} ${firstUse[k]?.toFixed(1)} ms`).join(", ")}`,
);
line("raw create+start   ", raw);
line("driver create      ", drv);
