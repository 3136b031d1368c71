import type { Logger } from "@tern/core";
import type Docker from "dockerode";
import { ContainmentError, type DiskLimitMode, type SandboxContainment, SandboxLabel } from "../driver.ts";
import { engineRuntimes, probeDiskLimit } from "./capabilities.ts";
import { applyEgressPolicy, type EgressPolicy, hostNetworks, hostResolvers, sandboxBridgeOf } from "./egress.ts";
import { type EgressKeeper, startEgressKeeper } from "./egress-keeper.ts";
import type { Resolver } from "./egress-names.ts";

export interface ContainmentOptions {
  /** For tests: name resolution and the iptables step. */
  resolve?: Resolver;
  applyEgress?: typeof applyEgressPolicy;
  logger?: Logger;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

export interface DockerContainment {
  /** Facts for the start-up log. */
  summary: Record<string, string>;
  disk: { mode: DiskLimitMode; limitMb: number | null; storage: string | null };
  /** Keeps the egress rules in step with DNS; null when no rules are asked for. */
  egress: EgressKeeper | null;
}

/** The disk limit this engine gives: its own where it holds `StorageOpt size`, else the worker's watch. */
const diskLimitOf = async (docker: Docker, diskMb: number | undefined): Promise<DockerContainment["disk"]> => {
  if (!diskMb) return { mode: "off", limitMb: null, storage: null };
  // Any image serves: the probe is created, never started.
  const [image] = await docker.listImages();
  if (!image) throw new ContainmentError("disk", "the Docker engine has no image to try a disk limit with");
  const disk = await probeDiskLimit(docker, {
    image: image.Id,
    diskMb,
    labels: { [SandboxLabel.Marker]: "1" },
  });
  return { mode: disk.supported ? "hard" : "watched", limitMb: diskMb, storage: disk.storage };
};

/**
 * The Docker side of `prepare`'s containment: the runtime is registered, the disk limit is the
 * engine's own or watched, and the egress rules are on the network's bridge (and kept in step with
 * DNS). Throws a ContainmentError only for what cannot be had at all: a runtime the engine lacks,
 * egress rules that cannot be installed.
 */
export const enforceDockerContainment = async (
  docker: Docker,
  network: string,
  containment: SandboxContainment,
  opts: ContainmentOptions = {},
): Promise<DockerContainment> => {
  const summary: Record<string, string> = {};
  if (containment.runtime) {
    const runtimes = await engineRuntimes(docker);
    if (!runtimes.includes(containment.runtime)) {
      throw new ContainmentError(
        "runtime",
        `the Docker engine has no runtime '${containment.runtime}' (it has ${runtimes.join(", ")}); register it ` +
          "(runsc: TERN_RUNSC=1 scripts/lib/ensure-docker.sh)",
      );
    }
    summary.runtime = containment.runtime;
  }

  const disk = await diskLimitOf(docker, containment.diskMb);
  if (disk.mode !== "off") summary.disk = `${disk.limitMb} MB ${disk.mode} (${disk.storage})`;

  let egress: EgressKeeper | null = null;
  if (containment.egress) {
    const install = async (resolved: Pick<EgressPolicy, "mode" | "services" | "allow">) => {
      try {
        const { bridge, ipv6 } = await sandboxBridgeOf(docker, network);
        const policy: EgressPolicy = { ...resolved, resolvers: hostResolvers(), hostNetworks: hostNetworks() };
        const { replaced } = await (opts.applyEgress ?? applyEgressPolicy)({ bridge, policy, ipv6 });
        summary.egress = `${resolved.mode} on ${bridge}${replaced ? " (replaced other settings)" : ""}`;
      } catch (err) {
        throw new ContainmentError(
          "egress",
          `cannot install the egress rules: ${messageOf(err)}; the worker must run as root on its Docker engine's host`,
        );
      }
    };
    egress = await startEgressKeeper({
      egress: containment.egress,
      install,
      ...(opts.resolve ? { resolve: opts.resolve } : {}),
      ...(opts.logger ? { logger: opts.logger } : {}),
    });
    const unresolved = egress.state().unresolved;
    if (unresolved.length > 0) summary.egress_unresolved = unresolved.map((u) => u.name).join(", ");
  }
  return { summary, disk, egress };
};
