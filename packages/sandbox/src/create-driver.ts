import type { Logger } from "@tern/core";
import { createDockerDriver } from "./docker/driver.ts";
import { createDockerClient, type DockerEngine } from "./docker/engine.ts";
import type { SandboxContainment, SandboxDriver } from "./driver.ts";

/** The drivers this package builds (SANDBOX_DRIVER). */
export const sandboxDriverNames = ["docker"] as const;
export type SandboxDriverName = (typeof sandboxDriverNames)[number];

export interface DockerSandboxConfig {
  driver: "docker";
  /** Where the engine is (DOCKER_HOST and its TLS and ssh settings); empty: the local socket. */
  engine?: DockerEngine;
  /** The sandboxes' own bridge network, made by `prepare` when missing. */
  network: string;
  /** What `prepare` checks and installs (disk limit, runtime, egress rules); unset: nothing. */
  containment?: SandboxContainment;
  /** ENGINE_ID: the engine's name for affinity; unset: its own id from `docker info`. */
  engineId?: string;
}

/** One entry per driver; a Kubernetes driver adds its own (namespace, kubeconfig, ...). */
export type SandboxDriverConfig = DockerSandboxConfig;

/**
 * The driver a configuration names. The worker builds its driver here and sees only the
 * `SandboxDriver` interface, so a new driver is a new case, not a change to the worker.
 */
export const createSandboxDriver = (config: SandboxDriverConfig, opts: { logger?: Logger } = {}): SandboxDriver => {
  switch (config.driver) {
    case "docker":
      return createDockerDriver(createDockerClient(config.engine), {
        network: config.network,
        ...(config.containment ? { containment: config.containment } : {}),
        ...(config.engineId ? { engineId: config.engineId } : {}),
        ...(opts.logger ? { logger: opts.logger } : {}),
      });
  }
};
