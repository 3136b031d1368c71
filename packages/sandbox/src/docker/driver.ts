import type Docker from "dockerode";
import type { ExecOptions, SandboxDriver, SandboxInfo, SandboxSpec, SandboxState } from "../driver.ts";
import { type ArchiveOwner, firstFileOf, packFiles } from "./archive.ts";
import { runExec } from "./exec.ts";

export interface DockerDriverOptions {
  /** Owner of uploaded files: the image's non-root user (uid/gid 1000 in tern-sandbox). */
  fileOwner?: ArchiveOwner;
  /** Largest file `download` returns. */
  maxDownloadBytes?: number;
}

const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number }).statusCode;

const toInfo = (c: Docker.ContainerInspectInfo): SandboxInfo => ({
  id: c.Id,
  name: c.Name.replace(/^\//, ""),
  state: c.State.Status as SandboxState,
  labels: c.Config.Labels ?? {},
  createdAt: c.Created,
});

/**
 * The hardening every sandbox gets: no capabilities at all (the workload runs as the image's
 * non-root user and needs none), no privilege gain through setuid binaries, resource limits,
 * a private network and no published ports.
 */
export const hardenedHostConfig = (spec: SandboxSpec): Docker.HostConfig => ({
  CapDrop: ["ALL"],
  SecurityOpt: ["no-new-privileges:true"],
  Privileged: false,
  Memory: spec.limits.memoryMb * 1024 * 1024,
  // No swap beyond the memory limit.
  MemorySwap: spec.limits.memoryMb * 1024 * 1024,
  NanoCpus: Math.round(spec.limits.cpus * 1e9),
  PidsLimit: spec.limits.pids,
  NetworkMode: spec.network,
  PublishAllPorts: false,
  PortBindings: {},
  IpcMode: "private",
  // A real init as pid 1 reaps the zombies that agents' commands leave behind.
  Init: true,
  RestartPolicy: { Name: "no" },
  LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
});

export const createDockerDriver = (docker: Docker, opts: DockerDriverOptions = {}): SandboxDriver => {
  const owner = opts.fileOwner ?? { uid: 1000, gid: 1000 };
  const maxDownload = opts.maxDownloadBytes ?? 16 * 1024 * 1024;

  const inspect = async (idOrName: string): Promise<SandboxInfo | null> => {
    try {
      return toInfo(await docker.getContainer(idOrName).inspect());
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
  };

  const destroy = async (idOrName: string): Promise<void> => {
    try {
      await docker.getContainer(idOrName).remove({ force: true, v: true });
    } catch (err) {
      // 404: already gone; 409: a removal is already in progress.
      if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
    }
  };

  /** Brings an existing container to "running" whatever state it was left in. */
  const ensureRunning = async (info: SandboxInfo): Promise<SandboxInfo | null> => {
    const c = docker.getContainer(info.id);
    try {
      if (info.state === "paused") await c.unpause();
      else if (info.state === "created" || info.state === "exited") await c.start();
      else if (info.state === "dead" || info.state === "removing") return null;
    } catch (err) {
      // 304: already started (a concurrent adopter); 409: already unpaused.
      if (statusOf(err) !== 304 && statusOf(err) !== 409) throw err;
    }
    return inspect(info.id);
  };

  const create = async (spec: SandboxSpec): Promise<SandboxInfo> => {
    for (let round = 0; round < 3; round++) {
      try {
        const c = await docker.createContainer({
          name: spec.name,
          Image: spec.image,
          Labels: spec.labels,
          Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
          Hostname: "sandbox",
          Tty: false,
          OpenStdin: false,
          HostConfig: hardenedHostConfig(spec),
        });
        try {
          await c.start();
        } catch (err) {
          if (statusOf(err) !== 304) throw err;
        }
        const info = await inspect(c.id);
        if (info) return info;
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
        // The name is taken: the container of this owner already exists (an earlier attempt). Adopt it.
        const existing = await inspect(spec.name);
        if (!existing) continue;
        const running = await ensureRunning(existing);
        if (running?.state === "running") return running;
        await destroy(spec.name);
      }
    }
    throw new Error(`container ${spec.name} could not be created`);
  };

  return {
    create,
    inspect,
    destroy,

    exec: (containerId: string, execOpts: ExecOptions) => runExec(docker.getContainer(containerId), execOpts),

    async upload(containerId, destDir, files) {
      const mk = await runExec(docker.getContainer(containerId), { cmd: ["mkdir", "-p", "--", destDir] });
      if (mk.exitCode !== 0) throw new Error(`cannot create ${destDir}: ${mk.stderr.trim()}`);
      const archive = await packFiles(files, owner);
      await docker.getContainer(containerId).putArchive(archive, { path: destDir });
    },

    async download(containerId, path) {
      try {
        const stream = await docker.getContainer(containerId).getArchive({ path });
        return await firstFileOf(stream, maxDownload);
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },

    async pause(containerId) {
      try {
        await docker.getContainer(containerId).pause();
      } catch (err) {
        // Already paused.
        if (statusOf(err) !== 409) throw err;
        const info = await inspect(containerId);
        if (info?.state !== "paused") throw err;
      }
    },

    async resume(containerId) {
      try {
        await docker.getContainer(containerId).unpause();
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
        const info = await inspect(containerId);
        if (info?.state !== "running") throw err;
      }
    },

    async list(labels) {
      const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
      const rows = await docker.listContainers({ all: true, filters: JSON.stringify(filters) });
      return rows.map((r) => ({
        id: r.Id,
        name: (r.Names[0] ?? "").replace(/^\//, ""),
        state: r.State as SandboxState,
        labels: r.Labels ?? {},
        createdAt: new Date(r.Created * 1000).toISOString(),
      }));
    },
  };
};
