import type { SandboxDriver } from "@tern/sandbox";
import type { DockerProbe, RawContainer } from "@tern/sandbox/docker";

/** Label on every container the bench makes itself, so a crashed run's leftovers are easy to find. */
export const BENCH_LABEL = "tern.bench";

/**
 * The floor of a sandbox start: what the service's driver does at least (create a container with
 * the driver's very hardening, start it, run one exec), done on Docker directly.
 */
export const createAndStart = (
  floor: DockerProbe,
  opts: { image: string; name: string; runId: string; network: string },
): Promise<RawContainer> =>
  floor.startRaw({
    name: opts.name,
    image: opts.image,
    labels: { [BENCH_LABEL]: opts.runId },
    network: opts.network,
    limits: { memoryMb: 2048, cpus: 1, pids: 512 },
  });

/** Removes every container of this run. */
export const removeBenchContainers = async (sandboxes: SandboxDriver, runId: string): Promise<number> => {
  const list = await sandboxes.list({ [BENCH_LABEL]: runId });
  await Promise.all(list.map((c) => sandboxes.destroy(c.ref).catch(() => undefined)));
  return list.length;
};
