import type Docker from "dockerode";
import type { SandboxLimits, SandboxRef } from "../driver.ts";
import { type DiskLimitSupport, engineRuntimes, probeDiskLimit } from "./capabilities.ts";
import { hardenedHostConfig } from "./driver.ts";
import { type SandboxBridge, sandboxBridgeOf } from "./egress.ts";
import { createDockerClient, type DockerEngine } from "./engine.ts";

/** A container started outside the driver, for the bench's floor. */
export interface RawContainer {
  /** Runs `cmd` and waits for its exit: one exec, with none of the driver's time limit or output caps. */
  exec(
    cmd: string[],
    opts?: { user?: string; cwd?: string; stdin?: Buffer },
  ): Promise<{ exitCode: number | null; output: string }>;
  remove(): Promise<void>;
}

/**
 * What the Docker driver keeps behind the driver interface, for the two places that must see
 * Docker itself: tests that check the hardening the engine applied, and the bench, whose floor is
 * a raw start with the driver's very hardening. The worker never imports this.
 */
export interface DockerProbe {
  /** Docker's own inspect document of a container (by ref or name). */
  inspect(sandbox: SandboxRef): Promise<Docker.ContainerInspectInfo>;
  /** Stops a container and leaves it there, as a crash or an operator would. */
  stop(sandbox: SandboxRef): Promise<void>;
  /** The runtimes the engine has registered (runc, and runsc when gVisor is). */
  runtimes(): Promise<string[]>;
  /** Whether the engine can hold a container to `diskMb` of writes. */
  diskLimit(image: string, diskMb: number): Promise<DiskLimitSupport>;
  /** The bridge interface behind a network, where its egress rules go. */
  bridgeOf(network: string): Promise<SandboxBridge>;
  /** Removes a network a test made (a missing one is fine). */
  removeNetwork(network: string): Promise<void>;
  /**
   * The floor of a sandbox start: create a container with the driver's very hardening (limits as
   * given, on `network`) and start it; nothing more.
   */
  startRaw(opts: {
    name: string;
    image: string;
    labels: Record<string, string>;
    network: string;
    limits: SandboxLimits;
  }): Promise<RawContainer>;
}

const rawExec = async (
  container: Docker.Container,
  cmd: string[],
  opts: { user?: string; cwd?: string; stdin?: Buffer } = {},
): Promise<{ exitCode: number | null; output: string }> => {
  const exec = await container.exec({
    Cmd: cmd,
    ...(opts.stdin ? { AttachStdin: true } : {}),
    AttachStdout: true,
    AttachStderr: true,
    ...(opts.user ? { User: opts.user } : {}),
    ...(opts.cwd ? { WorkingDir: opts.cwd } : {}),
  });
  const stream = await exec.start({ hijack: true, stdin: opts.stdin !== undefined });
  // Half-closed after the bytes, so the command reads its end of input.
  if (opts.stdin) stream.end(opts.stdin);
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

export const createDockerProbe = (engine: DockerEngine = {}): DockerProbe => {
  const docker = createDockerClient(engine);
  return {
    inspect: (sandbox) => docker.getContainer(sandbox).inspect(),
    runtimes: () => engineRuntimes(docker),
    diskLimit: (image, diskMb) => probeDiskLimit(docker, { image, diskMb }),
    bridgeOf: (network) => sandboxBridgeOf(docker, network),
    async removeNetwork(network) {
      await docker
        .getNetwork(network)
        .remove()
        .catch((err: { statusCode?: number }) => {
          if (err.statusCode !== 404) throw err;
        });
    },
    async stop(sandbox) {
      await docker.getContainer(sandbox).stop({ t: 0 });
    },
    async startRaw(opts) {
      const container = await docker.createContainer({
        name: opts.name,
        Image: opts.image,
        Labels: opts.labels,
        HostConfig: hardenedHostConfig(opts.limits, opts.network),
      });
      await container.start();
      return {
        exec: (cmd, execOpts) => rawExec(container, cmd, execOpts),
        async remove() {
          await container.remove({ force: true });
        },
      };
    },
  };
};
