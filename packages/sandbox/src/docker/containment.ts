import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import type Docker from "dockerode";
import { ContainmentError, type SandboxContainment, SandboxLabel } from "../driver.ts";
import { engineRuntimes, probeDiskLimit } from "./capabilities.ts";
import {
  applyEgressPolicy,
  canonicalCidr,
  type EgressPolicy,
  type EgressService,
  hostNetworks,
  hostResolvers,
  sandboxBridgeOf,
} from "./egress.ts";

/** A host name's addresses. */
export type Resolver = (host: string) => Promise<string[]>;

const resolveHost: Resolver = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

export interface ContainmentOptions {
  /** For tests: name resolution and the iptables step. */
  resolve?: Resolver;
  applyEgress?: typeof applyEgressPolicy;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The egress policy with every name resolved now, as the rules need addresses. */
export const resolveEgress = async (
  egress: NonNullable<SandboxContainment["egress"]>,
  resolve: Resolver = resolveHost,
): Promise<Pick<EgressPolicy, "mode" | "services" | "allow">> => {
  const addressesOf = async (host: string) => {
    const bare = host.replace(/^\[(.*)\]$/, "$1");
    if (isIP(bare)) return [bare];
    try {
      return await resolve(bare);
    } catch (err) {
      throw new ContainmentError(
        "egress",
        `cannot resolve ${bare} to write it into the egress rules: ${messageOf(err)}`,
      );
    }
  };
  const services = new Map<string, EgressService>();
  for (const { host, port } of egress.services) {
    for (const address of await addressesOf(host)) services.set(`${address}:${port}`, { address, port });
  }
  const allow: string[] = [];
  for (const entry of egress.allow) {
    try {
      if (entry.includes("/") || isIP(entry)) allow.push(canonicalCidr(entry).cidr);
      else allow.push(...(await addressesOf(entry)).map((a) => canonicalCidr(a).cidr));
    } catch (err) {
      if (err instanceof ContainmentError) throw err;
      throw new ContainmentError("egress", `cannot use '${entry}' as an address or CIDR: ${messageOf(err)}`);
    }
  }
  return { mode: egress.mode, services: [...services.values()], allow };
};

/**
 * The Docker side of `prepare`'s containment: the runtime is registered, the engine holds a disk
 * limit, and the egress rules are on the network's bridge. Returns facts for the start-up log.
 */
export const enforceDockerContainment = async (
  docker: Docker,
  network: string,
  containment: SandboxContainment,
  opts: ContainmentOptions = {},
): Promise<Record<string, string>> => {
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

  if (containment.diskMb) {
    // Any image serves: the probe is created, never started.
    const [image] = await docker.listImages();
    if (!image) throw new ContainmentError("disk", "the Docker engine has no image to try a disk limit with");
    const disk = await probeDiskLimit(docker, {
      image: image.Id,
      diskMb: containment.diskMb,
      labels: { [SandboxLabel.Marker]: "1" },
    });
    if (!disk.supported) {
      throw new ContainmentError(
        "disk",
        `the Docker engine cannot limit a sandbox's disk (${disk.storage}: ${disk.reason}); put its data root on XFS ` +
          "with pquota or on btrfs (TERN_DOCKER_XFS=1 scripts/lib/ensure-docker.sh)",
      );
    }
    summary.disk = `${containment.diskMb} MB (${disk.storage})`;
  }

  if (containment.egress) {
    const resolved = await resolveEgress(containment.egress, opts.resolve);
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
  }
  return summary;
};
