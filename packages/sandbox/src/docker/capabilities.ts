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
