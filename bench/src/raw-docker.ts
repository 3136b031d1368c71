import { hardenedHostConfig } from "@tern/sandbox";
import type Docker from "dockerode";

/** Label on every container the bench makes itself, so a crashed run's leftovers are easy to find. */
export const BENCH_LABEL = "tern.bench";

/**
 * The floor of a sandbox start: what the service's driver does at least (create a container with
 * the driver's very hardening, start it, run one exec), done with dockerode directly.
 */
export const createAndStart = async (
  docker: Docker,
  opts: { image: string; name: string; runId: string; network: string },
): Promise<Docker.Container> => {
  const container = await docker.createContainer({
    name: opts.name,
    Image: opts.image,
    Labels: { [BENCH_LABEL]: opts.runId },
    HostConfig: hardenedHostConfig({
      name: opts.name,
      image: opts.image,
      labels: {},
      limits: { memoryMb: 2048, cpus: 1, pids: 512 },
      network: opts.network,
    }),
  });
  await container.start();
  return container;
};

/** Runs `cmd` in the container and waits for its exit; returns the exit code and output. */
export const execRaw = async (
  container: Docker.Container,
  cmd: string[],
  opts: { user?: string; cwd?: string } = {},
): Promise<{ exitCode: number | null; output: string }> => {
  const exec = await container.exec({
    Cmd: cmd,
    AttachStdout: true,
    AttachStderr: true,
    ...(opts.user ? { User: opts.user } : {}),
    ...(opts.cwd ? { WorkingDir: opts.cwd } : {}),
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c));
  await new Promise<void>((resolve, reject) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", reject);
  });
  const info = await exec.inspect();
  return { exitCode: info.ExitCode ?? null, output: Buffer.concat(chunks).toString("utf8") };
};

/** Removes every container of this run (or of any bench run when runId is omitted). */
export const removeBenchContainers = async (docker: Docker, runId?: string): Promise<number> => {
  const list = await docker.listContainers({
    all: true,
    filters: { label: [runId ? `${BENCH_LABEL}=${runId}` : BENCH_LABEL] },
  });
  await Promise.all(
    list.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  return list.length;
};
