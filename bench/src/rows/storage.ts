import type { DockerProbe } from "@tern/sandbox/docker";
import { createDockerProbe } from "@tern/sandbox/docker";
import { engineSandboxDriver, ensureTestEngine, prepareTestSandboxes, testSandboxNetworkName } from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { engineStorage } from "../engine-storage.ts";
import { createAndStart } from "../raw-docker.ts";
import { type BenchRow, row } from "../report.ts";
import { since, summarize } from "../stats.ts";
import { BENCH_ENGINE } from "./engines.ts";

/** One raw create + start + exec on `floor` (ms); the container is removed afterwards. */
const rawStart = async (ctx: BenchContext, floor: DockerProbe, name: string, network: string): Promise<number> => {
  const t = performance.now();
  const c = await createAndStart(floor, { image: ctx.image, name, runId: ctx.runId, network });
  const r = await c.exec(["true"], { user: "agent" });
  const ms = since(t);
  if (r.exitCode !== 0) throw new Error(`raw exec exited ${r.exitCode}`);
  await c.remove();
  return ms;
};

/** The bench's engine with userns-remap (ensure-engine.sh with TERN_DOCKER_USERNS=1): its own, as it is chosen at start. */
const BENCH_USERNS_ENGINE = 34;

/**
 * What a data root with quotas costs, and what userns-remap (the engine that gives sandboxes sudo)
 * costs: raw create + start + one exec on the main engine (Docker's default storage: overlay2 on
 * the host's filesystem, the worker watching the disk), on the bench's second engine, whose data
 * root holds hard limits (XFS with pquota, or btrfs in a loop file where the kernel has no XFS
 * quotas: scripts/lib/ensure-engine.sh), and on an engine like it with userns-remap, one sample of
 * each in turn, so all see the same load. The rows are the other engines' p50 against the main one's.
 */
export const storageRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const samples = ctx.quick ? 4 : 30;
  const network = testSandboxNetworkName();
  const quotaHost = await ensureTestEngine(BENCH_ENGINE);
  await prepareTestSandboxes(ctx.sandboxes);
  await engineSandboxDriver(quotaHost, network).prepare();
  const quotaFloor = createDockerProbe({ host: quotaHost });
  const quotaStorage = engineStorage(quotaHost);
  const usernsHost = await ensureTestEngine(BENCH_USERNS_ENGINE, { userns: true });
  await engineSandboxDriver(usernsHost, network).prepare();
  const usernsFloor = createDockerProbe({ host: usernsHost });
  const usernsStorage = engineStorage(usernsHost);
  const main: number[] = [];
  const quota: number[] = [];
  const userns: number[] = [];
  const engines = ["main", "quota", "userns"] as const;
  for (let i = 0; i < samples; i++) {
    // Rotating which goes first, so none always runs right after another's cleanup.
    const order = engines.map((_, k) => engines[(i + k) % engines.length] ?? "main");
    for (const which of order) {
      const name = `tern-bench-storage-${ctx.runId}-${which}-${i}`;
      if (which === "main") main.push(await rawStart(ctx, ctx.floor, name, network));
      else if (which === "quota") quota.push(await rawStart(ctx, quotaFloor, name, network));
      else userns.push(await rawStart(ctx, usernsFloor, name, network));
    }
  }
  const onMain = summarize(main);
  const onQuota = summarize(quota);
  const onUserns = summarize(userns);
  ctx.progress(
    `raw create+start+exec p50: ${onMain.p50.toFixed(0)} ms on ${ctx.storage}, ${onQuota.p50.toFixed(0)} ms on ${quotaStorage}, ` +
      `${onUserns.p50.toFixed(0)} ms with userns-remap on ${usernsStorage}`,
  );
  return [
    row({
      id: "storage.quota_root.p50",
      label: `raw create+start+exec on a quota data root (${quotaStorage}), p50`,
      unit: "ms",
      value: onQuota.p50,
      floor: onMain.p50,
      floorLabel: "the same on the main engine",
      floorStorage: ctx.storage,
      detail: { samples, quotaStorage, mainStorage: ctx.storage, quota: onQuota, main: onMain },
    }),
    row({
      id: "storage.userns_root.p50",
      label: `raw create+start+exec on an engine with userns-remap (${usernsStorage}), p50`,
      unit: "ms",
      value: onUserns.p50,
      floor: onMain.p50,
      floorLabel: "the same on the main engine",
      floorStorage: ctx.storage,
      detail: { samples, usernsStorage, mainStorage: ctx.storage, userns: onUserns, main: onMain },
    }),
  ];
};
