import { randomBytes } from "node:crypto";
import type Docker from "dockerode";

export interface DiskLimitSupport {
  supported: boolean;
  /** The engine's storage driver and, where it says, the filesystem under it: for the operator's message. */
  storage: string;
  /** Why not, in the engine's words. */
  reason?: string;
}

const statusField = (info: { DriverStatus?: [string, string][] }, name: string): string | undefined =>
  info.DriverStatus?.find(([k]) => k === name)?.[1];

/**
 * Whether containers of this engine can be held to `diskMb` of writes (`StorageOpt size`): overlay2
 * on XFS mounted with pquota, btrfs (quota groups), zfs and others. overlay2 on any other filesystem
 * is known not to; anything else is tried with a container that is created and removed, never started.
 */
export const probeDiskLimit = async (
  docker: Docker,
  opts: { image: string; diskMb: number; labels?: Record<string, string> },
): Promise<DiskLimitSupport> => {
  const info = (await docker.info()) as { Driver?: string; DriverStatus?: [string, string][] };
  const backing = statusField(info, "Backing Filesystem");
  const storage = `${info.Driver ?? "unknown"}${backing ? ` on ${backing}` : ""}`;
  if (info.Driver === "overlay2" && backing && backing !== "xfs") {
    return { supported: false, storage, reason: "overlay2 limits a container's size only on XFS mounted with pquota" };
  }
  const name = `tern-disk-probe-${randomBytes(6).toString("hex")}`;
  try {
    const c = await docker.createContainer({
      name,
      Image: opts.image,
      Labels: opts.labels ?? {},
      Cmd: ["true"],
      HostConfig: { StorageOpt: { size: `${opts.diskMb}M` } },
    });
    await c.remove({ force: true }).catch(() => undefined);
    return { supported: true, storage };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    await docker
      .getContainer(name)
      .remove({ force: true })
      .catch(() => undefined);
    return { supported: false, storage, reason };
  }
};

/** The runtimes registered with the engine (runc, and runsc when gVisor is). */
export const engineRuntimes = async (docker: Docker): Promise<string[]> => {
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
  return Object.keys(info.Runtimes ?? {});
};

/**
 * What the engine itself does to a container's root: `userns-remap` or `rootless` map it to an
 * unprivileged host uid (`docker info`'s SecurityOptions: "name=userns", "name=rootless"); null:
 * a container's root is the host's (capabilities and seccomp aside).
 */
export const engineRootMapping = async (docker: Docker): Promise<"userns-remap" | "rootless" | null> => {
  const info = (await docker.info()) as { SecurityOptions?: string[] };
  const names = (info.SecurityOptions ?? []).flatMap((opt) =>
    opt
      .split(",")
      .filter((kv) => kv.startsWith("name="))
      .map((kv) => kv.slice("name=".length)),
  );
  if (names.includes("rootless")) return "rootless";
  if (names.includes("userns")) return "userns-remap";
  return null;
};

/** Runtimes that are gVisor: named runsc, or registered with a runsc binary under another name. */
export const gvisorRuntimes = async (docker: Docker): Promise<string[]> => {
  const info = (await docker.info()) as { Runtimes?: Record<string, { path?: string }> };
  return Object.entries(info.Runtimes ?? {})
    .filter(([name, rt]) => name === "runsc" || /(^|\/)runsc$/.test(rt?.path ?? ""))
    .map(([name]) => name);
};
