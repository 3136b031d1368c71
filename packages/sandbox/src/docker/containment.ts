import type { Logger } from "@tern/core";
import type Docker from "dockerode";
import {
  ContainmentError,
  type DiskLimitMode,
  type RootState,
  type SandboxContainment,
  SandboxLabel,
  type SudoSetting,
} from "../driver.ts";
import { engineRootMapping, engineRuntimes, gvisorRuntimes, probeDiskLimit } from "./capabilities.ts";
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
  root: DockerRoot;
}

/** What decides root in a sandbox on this engine: its root mapping, its gVisor runtimes, the setting. */
export interface DockerRoot {
  mapping: "userns-remap" | "rootless" | null;
  gvisor: string[];
  sudo: SudoSetting;
}

/** No root anywhere: a driver that was not prepared, or not asked for sudo. */
export const NO_ROOT: DockerRoot = { mapping: null, gvisor: [], sudo: "off" };

/** Root in a sandbox of `runtime` (unset: the engine's default) on this engine. */
export const rootStateOf = (root: DockerRoot, runtime: string | undefined): RootState => {
  const safety = root.mapping ?? (runtime && root.gvisor.includes(runtime) ? "runsc" : null);
  if (root.sudo === "off") return { mode: "none", safety, forced: false };
  if (safety) return { mode: "sudo", safety, forced: false };
  if (root.sudo === "force") return { mode: "sudo", safety: null, forced: true };
  return { mode: "none", safety: null, forced: false };
};

/** The start-up log's words for a root state. */
const rootSummary = (state: RootState): string =>
  state.mode === "none"
    ? `no sudo${state.safety ? ` (SANDBOX_SUDO=off on a ${state.safety} engine)` : ""}`
    : state.forced
      ? "sudo, FORCED (SANDBOX_SUDO=force): root inside is the host's root, capabilities aside"
      : `sudo (${state.safety})`;

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
  // No setting, no question to the engine: no root.
  const root: DockerRoot = containment.sudo
    ? { mapping: await engineRootMapping(docker), gvisor: await gvisorRuntimes(docker), sudo: containment.sudo }
    : NO_ROOT;
  const rootState = rootStateOf(root, containment.runtime);
  if (containment.sudo) summary.root = rootSummary(rootState);
  if (rootState.forced) {
    opts.logger?.warn(
      { root: "sudo", sudo: "force" },
      "SANDBOX_SUDO=force: sandboxes get sudo on an engine that does not map root to an unprivileged user; " +
        "a sandbox's root is the host's root (capabilities and seccomp aside). See the README, \"Root in sandboxes\"",
    );
  }
  return { summary, disk, egress, root };
};
