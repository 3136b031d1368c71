import type { Logger } from "@tern/core";
import type Docker from "dockerode";
import {
  type ContainmentState,
  type ExecOptions,
  type PreparedSandboxes,
  type RootState,
  SANDBOX_STATE_DIR,
  SANDBOX_STATE_MB,
  type SandboxContainment,
  type SandboxDriver,
  type SandboxInfo,
  type SandboxLimits,
  type SandboxSpec,
  type SandboxState,
} from "../driver.ts";
import { type ArchiveOwner, firstFileOf, packFiles } from "./archive.ts";
import { type DockerContainment, enforceDockerContainment, NO_ROOT, rootStateOf } from "./containment.ts";
import { openExecProcess, runExec } from "./exec.ts";
import { ensureSandboxNetwork } from "./network.ts";
import { prepareRuntimeImage } from "./runtime-image.ts";

export interface DockerDriverOptions {
  /** The sandboxes' own bridge network, made by `prepare` when missing; every sandbox joins it. */
  network: string;
  /** Owner of uploaded files: the image's non-root user (uid/gid 1000 in tern-sandbox). */
  fileOwner?: ArchiveOwner;
  /** Largest file `download` returns. */
  maxDownloadBytes?: number;
  /** Checked and installed by `prepare`; its disk limit and runtime apply to every sandbox. */
  containment?: SandboxContainment;
  /** The engine's name for affinity (ENGINE_ID); unset: the engine's own id from `docker info`. */
  engineId?: string;
  /** Where the egress names' refresh says what it could not resolve. */
  logger?: Logger;
}

/** An engine id as queue names and labels carry it: Docker's ids are safe, older ones hold colons. */
const engineIdSafe = (id: string): string => id.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 64);

const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number }).statusCode;

/** Docker's container states in our words; callers never see Docker's. */
export const sandboxStateOf = (dockerState: string): SandboxState => {
  switch (dockerState) {
    case "running":
      return "running";
    case "paused":
      return "paused";
    case "created":
    case "restarting":
      return "starting";
    case "exited":
      return "stopped";
    default:
      // dead, removing, and anything a later engine adds: it will not run again.
      return "failed";
  }
};

const toInfo = (c: Docker.ContainerInspectInfo): SandboxInfo => ({
  ref: c.Id,
  name: c.Name.replace(/^\//, ""),
  state: sandboxStateOf(c.State.Status),
  labels: c.Config.Labels ?? {},
  createdAt: c.Created,
  image: c.Config.Image,
});

/** Open files per process when a spec says nothing: enough for builds and language servers. */
const DEFAULT_NOFILE = 4096;
/** Processes of the sandbox uid, host-wide (see SandboxLimits.nproc): 16 sandboxes' worth of the default pids limit. */
const DEFAULT_NPROC = 8192;
/** The unprivileged user every sandbox runs as (the sandbox image's `agent`), unless the driver is given another. */
const SANDBOX_USER: ArchiveOwner = { uid: 1000, gid: 1000 };

/**
 * What root inside a sandbox may do where it has sudo: what package installs need (files of any
 * owner and mode, dropping to apt's own user), never SYS_ADMIN, NET_ADMIN, NET_RAW or the like.
 */
const SUDO_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"] as const;

/**
 * The hardening every sandbox gets: no capabilities at all (the workload runs as the image's
 * non-root user and needs none), no privilege gain through setuid binaries, resource limits,
 * a private network and no published ports. Where root is `sudo` (an engine that maps root to an
 * unprivileged user, gVisor, or the operator's force), setuid works again for sudo, the only
 * setuid program the image keeps, and root gets SUDO_CAPABILITIES; the default seccomp profile
 * stays either way.
 */
export const hardenedHostConfig = (
  limits: SandboxLimits,
  network: string,
  runtime?: string,
  owner: ArchiveOwner = SANDBOX_USER,
  root: RootState["mode"] = "none",
): Docker.HostConfig => ({
  CapDrop: ["ALL"],
  ...(root === "sudo"
    ? { CapAdd: [...SUDO_CAPABILITIES], SecurityOpt: [] }
    : { SecurityOpt: ["no-new-privileges:true"] }),
  Privileged: false,
  Memory: limits.memoryMb * 1024 * 1024,
  // No swap beyond the memory limit.
  MemorySwap: limits.memoryMb * 1024 * 1024,
  NanoCpus: Math.round(limits.cpus * 1e9),
  PidsLimit: limits.pids,
  Ulimits: [
    { Name: "nofile", Soft: limits.nofile ?? DEFAULT_NOFILE, Hard: limits.nofile ?? DEFAULT_NOFILE },
    { Name: "nproc", Soft: limits.nproc ?? DEFAULT_NPROC, Hard: limits.nproc ?? DEFAULT_NPROC },
  ],
  ...(limits.diskMb ? { StorageOpt: { size: `${limits.diskMb}M` } } : {}),
  // Outside the disk limit: the tools' state (SANDBOX_STATE_DIR). No exec from it, as for /dev/shm.
  // Owned by the sandbox's user: Docker gives a tmpfs the mode and owner of the directory under it,
  // and an image committed from a sandbox (a repository snapshot, the empty-workspace image) holds
  // the mount point as root's, 0755, where `mode=1777` alone would leave the agent unable to write.
  Tmpfs: {
    [SANDBOX_STATE_DIR]: `rw,nosuid,nodev,noexec,size=${SANDBOX_STATE_MB}m,mode=1777,uid=${owner.uid},gid=${owner.gid}`,
  },
  ...(runtime ? { Runtime: runtime } : {}),
  NetworkMode: network,
  PublishAllPorts: false,
  PortBindings: {},
  IpcMode: "private",
  // A real init as pid 1 reaps the zombies that agents' commands leave behind.
  Init: true,
  RestartPolicy: { Name: "no" },
  LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
});

export const createDockerDriver = (docker: Docker, opts: DockerDriverOptions): SandboxDriver => {
  const owner = opts.fileOwner ?? SANDBOX_USER;
  // What prepare found and installed.
  let contained: DockerContainment | null = null;
  const maxDownload = opts.maxDownloadBytes ?? 16 * 1024 * 1024;

  const inspect = async (ref: string): Promise<SandboxInfo | null> => {
    try {
      return toInfo(await docker.getContainer(ref).inspect());
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
  };

  /**
   * Docker sets a container's paused flag when pause or unpause returns, and again when containerd's
   * event for it arrives; an old "paused" event handled after an unpause reads the container as
   * paused for a moment, though it runs. Wait (bounded) until inspect agrees with what was asked.
   */
  const settlesAs = async (ref: string, want: SandboxState, withinMs = 5_000): Promise<boolean> => {
    const until = Date.now() + withinMs;
    for (;;) {
      const state = (await inspect(ref))?.state;
      if (state === want) return true;
      if (state === undefined || Date.now() >= until) return false;
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  const destroy = async (ref: string): Promise<void> => {
    try {
      await docker.getContainer(ref).remove({ force: true, v: true });
    } catch (err) {
      // 404: already gone; 409: a removal is already in progress.
      if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
    }
  };

  /** Brings an existing container to "running" whatever state it was left in. */
  const ensureRunning = async (info: SandboxInfo): Promise<SandboxInfo | null> => {
    const c = docker.getContainer(info.ref);
    try {
      if (info.state === "paused") await c.unpause();
      else if (info.state === "starting" || info.state === "stopped") await c.start();
      else if (info.state === "failed") return null;
    } catch (err) {
      // 304: already started (a concurrent adopter); 409: already unpaused.
      if (statusOf(err) !== 304 && statusOf(err) !== 409) throw err;
    }
    return inspect(info.ref);
  };

  const create = async (spec: SandboxSpec): Promise<SandboxInfo> => {
    const runtime = spec.runtime ?? opts.containment?.runtime;
    const root = rootStateOf(contained?.root ?? NO_ROOT, runtime);
    for (let round = 0; round < 3; round++) {
      try {
        const c = await docker.createContainer({
          name: spec.name,
          Image: spec.image,
          Labels: spec.labels,
          Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
          Hostname: "sandbox",
          // Always the unprivileged user, whatever the image says: an image without USER would run as root.
          User: `${owner.uid}:${owner.gid}`,
          Tty: false,
          OpenStdin: false,
          HostConfig: hardenedHostConfig(
            {
              ...spec.limits,
              // A watched limit is the worker's to hold: the engine, which cannot, is asked for none.
              diskMb: contained?.disk.mode === "watched" ? undefined : (spec.limits.diskMb ?? opts.containment?.diskMb),
            },
            opts.network,
            runtime,
            owner,
            root.mode,
          ),
        });
        const createdAt = new Date().toISOString();
        try {
          await c.start();
        } catch (err) {
          // 304: already started (a concurrent adopter of the name).
          if (statusOf(err) !== 304) throw err;
        }
        // Made and started by this call: everything an inspect would say is known already (a round
        // trip of the engine's saved on every cold start). A container that died at once is found
        // by the first command run in it, as one that dies a moment later would be.
        return { ref: c.id, name: spec.name, state: "running", labels: spec.labels, createdAt, image: spec.image };
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
    async prepare(): Promise<PreparedSandboxes> {
      await docker.ping();
      // A Docker engine's containers are reachable only through that engine: sandboxes have affinity.
      const engineId = engineIdSafe(opts.engineId ?? ((await docker.info()) as { ID?: string }).ID ?? "");
      if (!engineId) throw new Error("the Docker engine reports no ID; set ENGINE_ID");
      const network = await ensureSandboxNetwork(docker, opts.network);
      // Before any sandbox exists: a driver that cannot hold them in makes none.
      if (opts.containment) {
        await contained?.egress?.stop();
        contained = await enforceDockerContainment(docker, network.name, opts.containment, {
          ...(opts.logger ? { logger: opts.logger } : {}),
        });
      }
      return {
        hostAddress: network.gateway,
        summary: { driver: "docker", engine: engineId, network: network.name, ...contained?.summary },
        engineId,
      };
    },

    containmentState(): ContainmentState {
      return {
        disk: contained?.disk ?? { mode: "off", limitMb: null, storage: null },
        egress: contained?.egress?.state() ?? null,
        root: rootStateOf(contained?.root ?? NO_ROOT, opts.containment?.runtime),
      };
    },

    async writtenBytes(ref) {
      try {
        // SizeRw: the container's writable layer, which holds /workspace too (it is no volume).
        // dockerode passes any query option on; its types only know `abortSignal`.
        const sized = { size: true } as Docker.ContainerInspectOptions;
        const info = (await docker.getContainer(ref).inspect(sized)) as { SizeRw?: number };
        return info.SizeRw ?? 0;
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },

    async close() {
      await contained?.egress?.stop();
    },

    create,
    inspect,
    destroy,

    async commit(ref, commitOpts) {
      const container = await docker.getContainer(ref).inspect();
      const base = await docker.getImage(commitOpts.baseImage).inspect();
      const baseEnv = base.Config?.Env ?? [];
      // The engine keeps the container's own config beside the image's (`ContainerConfig`, shown by
      // inspect and history): a sandbox given any variable its image has not is never committed, so
      // no value given at create (a secret) can end up in an image. Commands get theirs per exec.
      const extra = (container.Config.Env ?? []).filter((e) => !baseEnv.includes(e));
      if (extra.length > 0) {
        throw new Error(
          `sandbox ${ref} has environment of its own (${extra.map((e) => e.split("=", 1)[0]).join(", ")}): not committed`,
        );
      }
      const env = baseEnv;
      const labels: Record<string, string> = {};
      for (const k of Object.keys(container.Config.Labels ?? {})) labels[k] = base.Config?.Labels?.[k] ?? "";
      Object.assign(labels, commitOpts.labels);
      const made = (await docker.getContainer(ref).commit({
        _query: { container: container.Id, pause: false },
        _body: { Env: env, Labels: labels },
      })) as { Id: string };
      const image = await docker.getImage(made.Id).inspect();
      return { image: made.Id, bytes: Math.max(0, (image.Size ?? 0) - (base.Size ?? 0)) };
    },

    async listImages(labels) {
      const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
      const rows = await docker.listImages({ all: false, filters: JSON.stringify(filters) });
      return rows.map((r) => ({
        image: r.Id,
        labels: r.Labels ?? {},
        createdAt: new Date(r.Created * 1000).toISOString(),
      }));
    },

    async imageId(image) {
      try {
        return (await docker.getImage(image).inspect()).Id;
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },

    async removeImage(image) {
      try {
        await docker.getImage(image).remove({ force: false, noprune: false });
      } catch (err) {
        // 404: already gone; 409: a sandbox still runs from it (removed by a later sweep).
        if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
      }
    },

    prepareRuntimeImage: (base, runtimeOpts) => prepareRuntimeImage(docker, base, runtimeOpts),

    exec: (ref: string, execOpts: ExecOptions) => runExec(docker.getContainer(ref), execOpts),
    openProcess: (ref, opts) => openExecProcess(docker.getContainer(ref), opts),

    async upload(ref, destDir, files) {
      const mk = await runExec(docker.getContainer(ref), { cmd: ["mkdir", "-p", "--", destDir] });
      if (mk.exitCode !== 0) throw new Error(`cannot create ${destDir}: ${mk.stderr.trim()}`);
      const archive = await packFiles(files, owner);
      await docker.getContainer(ref).putArchive(archive, { path: destDir });
    },

    async putArchive(ref, destDir, archive) {
      await docker.getContainer(ref).putArchive(archive, { path: destDir, noOverwriteDirNonDir: "true" });
    },

    async download(ref, path) {
      try {
        const stream = await docker.getContainer(ref).getArchive({ path });
        return await firstFileOf(stream, maxDownload);
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },

    async archive(ref, path) {
      try {
        return await docker.getContainer(ref).getArchive({ path });
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },

    async pause(ref) {
      try {
        await docker.getContainer(ref).pause();
      } catch (err) {
        // Already paused.
        if (statusOf(err) !== 409) throw err;
      }
      if (!(await settlesAs(ref, "paused"))) throw new Error(`sandbox ${ref} did not pause`);
    },

    async resume(ref) {
      try {
        await docker.getContainer(ref).unpause();
      } catch (err) {
        // Not paused (Docker answers 500 "is not paused", some versions 409): running is what was asked.
        if (statusOf(err) === 404) throw err;
      }
      if (!(await settlesAs(ref, "running"))) throw new Error(`sandbox ${ref} did not resume`);
    },

    async list(labels) {
      const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
      const rows = await docker.listContainers({ all: true, filters: JSON.stringify(filters) });
      return rows.map((r) => ({
        ref: r.Id,
        name: (r.Names[0] ?? "").replace(/^\//, ""),
        state: sandboxStateOf(r.State),
        labels: r.Labels ?? {},
        createdAt: new Date(r.Created * 1000).toISOString(),
      }));
    },
  };
};
