import { SandboxLabel } from "@tern/sandbox";
import { createDockerProbe } from "@tern/sandbox/docker";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  engineSandboxDriver,
  ensureTestEngine,
  prepareTestSandboxes,
  testSandboxNetworkName,
} from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { engineStorage } from "../engine-storage.ts";
import { createAndStart, removeBenchContainers } from "../raw-docker.ts";
import { type BenchRow, row } from "../report.ts";
import { startDeployment } from "../starts.ts";

/**
 * The second engine (scripts/lib/ensure-engine.sh 16): one of the bench's own (the two-engines test
 * stops engine 15 for good mid-run, and the bench's quick test runs beside it). Its data root holds
 * hard disk limits, so the storage section measures what those cost on it too.
 */
export const BENCH_ENGINE = 16;
/** Starts each worker runs at once (WORKER_CONCURRENCY's default). */
const CONCURRENCY = 4;

/**
 * Start throughput with two engines against one: a burst of cold starts (no warm pool)
 * through the API, taken by two workers on the main engine, then by one worker on the main engine
 * and one on engine 15. The floor is raw create + start + one exec, 8 in flight, spread the same
 * way. Both engines run on this machine's two cores, so a second engine adds no CPU: what it can
 * show is whether one engine's serialisation (its daemon, containerd, its network and storage
 * locks) bounds the starts, or the cores do.
 */
export const engineRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const burst = ctx.quick ? 4 : 40;
  const network = testSandboxNetworkName();
  const secondHost = await ensureTestEngine(BENCH_ENGINE);
  const second = engineSandboxDriver(secondHost, network);
  await prepareTestSandboxes(ctx.sandboxes);
  await second.prepare();
  const secondFloor = createDockerProbe({ host: secondHost });
  const secondStorage = engineStorage(secondHost);

  const raw = async (floors: (typeof ctx.floor)[]): Promise<number> => {
    let next = 0;
    const t = performance.now();
    await Promise.all(
      Array.from({ length: 8 }, async (_, lane) => {
        const floor = floors[lane % floors.length] ?? ctx.floor;
        while (next < burst) {
          const i = next++;
          const c = await createAndStart(floor, {
            image: ctx.image,
            name: `tern-bench-eng-${ctx.runId}-${i}`,
            runId: ctx.runId,
            network,
          });
          const r = await c.exec(["true"], { user: "agent" });
          if (r.exitCode !== 0) throw new Error(`raw exec exited ${r.exitCode}`);
        }
      }),
    );
    const rate = burst / ((performance.now() - t) / 1000);
    await Promise.all([removeBenchContainers(ctx.sandboxes, ctx.runId), removeBenchContainers(second, ctx.runId)]);
    return rate;
  };

  const db = await createTestDatabase();
  const rows: BenchRow[] = [];
  try {
    for (const engines of [1, 2] as const) {
      const floorRate = await raw(engines === 1 ? [ctx.floor] : [ctx.floor, secondFloor]);
      const prefix = createRedisPrefix();
      const d = await startDeployment({
        databaseUrl: db.url,
        prefix,
        workers: 2,
        poolSize: 0,
        env: { SANDBOX_NETWORK: network, WORKER_CONCURRENCY: String(CONCURRENCY) },
        workerEnv: (i): Record<string, string> =>
          engines === 2 && i === 1 ? { DOCKER_HOST: secondHost, ENGINE_ID: "bench-e15" } : {},
      });
      try {
        await new Promise((r) => setTimeout(r, 1_500));
        const result = await d.burst(burst, (i) => ({ title: `engines ${i}` }));
        const rate = burst / (result.spanMs / 1000);
        const onSecond = (await second.list({ [SandboxLabel.Namespace]: prefix })).length;
        ctx.progress(
          `throughput, 2 workers on ${engines} engine(s): ${rate.toFixed(1)} starts/s (raw ${floorRate.toFixed(1)}); ${onSecond} of ${burst} on engine ${BENCH_ENGINE}`,
        );
        rows.push(
          row({
            id: `throughput.engines${engines}`,
            label: `start throughput, 2 workers on ${engines} engine${engines > 1 ? "s" : ""} (burst of ${burst}, no pool)`,
            unit: "starts/s",
            value: rate,
            floor: floorRate,
            floorLabel: `raw create+start+exec ×8 parallel on ${engines} engine${engines > 1 ? "s" : ""}`,
            floorStorage: engines === 1 ? ctx.storage : `${ctx.storage} and ${secondStorage}`,
            better: "higher-is-better",
            detail: { burst, spanMs: result.spanMs, onSecondEngine: onSecond, concurrency: CONCURRENCY },
          }),
        );
      } finally {
        await d.stop();
        const left = await second.list({ [SandboxLabel.Namespace]: prefix });
        await Promise.all(left.map((c) => second.destroy(c.ref).catch(() => undefined)));
        await deleteRedisPrefix(prefix);
      }
    }
  } finally {
    await db.drop();
  }
  return rows;
};
