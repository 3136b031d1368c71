import { ConfigError } from "@tern/core";
import { z } from "zod";
import { type SandboxDriverConfig, sandboxDriverNames } from "./create-driver.ts";
import { dockerEngineFromEnv } from "./docker/engine.ts";
import type { ContainmentError, SandboxContainment, SandboxEgress } from "./driver.ts";

const emptyAsUndefined = (v: unknown) => (v === "" ? undefined : v);
const optionalString = z.preprocess(emptyAsUndefined, z.string().optional());
/** true/false (also 1/0, yes/no): an operator's opt-out is spelled out, never implied by a typo. */
const flag = z.preprocess(
  emptyAsUndefined,
  z.enum(["true", "false", "1", "0", "yes", "no"]).transform((v) => v === "true" || v === "1" || v === "yes"),
);
/** Comma-separated host names, addresses or CIDRs. */
const hostList = z.preprocess(
  (v) =>
    typeof v === "string"
      ? v
          .split(",")
          .map((e) => e.trim())
          .filter(Boolean)
      : v,
  z.array(
    z.string().regex(/^[A-Za-z0-9.:_-]+(\/\d{1,3})?$/, "must be host names, addresses or CIDRs, comma-separated"),
  ),
);

/**
 * The variables that choose the sandbox driver and reach its backend, keyed by name. A process
 * composes them into its one config schema and hands the parsed values to `sandboxDriverConfig`:
 * a new driver brings its variables here, and the process does not change.
 */
export const sandboxConfigFields = {
  SANDBOX_DRIVER: z.enum(sandboxDriverNames).default("docker"),
  // The Docker engine, in the Docker CLI's own variables; docker-modem interprets them (docker/engine.ts).
  DOCKER_HOST: optionalString,
  /** docker-modem turns on https for "1" only: any other value would silently mean plain http. */
  DOCKER_TLS_VERIFY: z.preprocess(emptyAsUndefined, z.enum(["0", "1"]).optional()),
  DOCKER_CERT_PATH: optionalString,
  /** The ssh agent an `ssh://` DOCKER_HOST is reached with. */
  SSH_AUTH_SOCK: optionalString,
  /**
   * Docker: the name of the engine this worker drives, shared by every worker of that engine (its
   * sandboxes' jobs go to that engine's queues); unset: the engine's own id from `docker info`.
   */
  ENGINE_ID: z.preprocess(
    emptyAsUndefined,
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, "letters, digits, '_', '.' and '-' only, at most 64")
      .optional(),
  ),
  /** Docker: the sandboxes' own bridge network. */
  SANDBOX_NETWORK: z.string().min(1).default("tern-sandboxes"),
  /**
   * Writes per sandbox. Held by the backend where it can (hard); elsewhere the worker samples what
   * each sandbox wrote and pauses one past it (watched).
   */
  SANDBOX_DISK_MB: z.coerce.number().int().min(64).max(16_777_216).default(10240),
  /** false: no disk limit of either kind (the operator's explicit choice). */
  SANDBOX_DISK_ENFORCE: flag.default(true),
  /**
   * Watched disk limit: the fastest a sandbox may write, in MB/s. Each sandbox is sampled sooner
   * the closer it is to its limit, as if writing this fast (or faster, when it was seen to), so a
   * fill overshoots by about a second's worth of it at most.
   */
  SANDBOX_DISK_WRITE_MBPS: z.coerce.number().int().min(1).max(100_000).default(1000),
  /** The runtime sandboxes run under, e.g. runsc (gVisor); unset: the backend's default (runc). */
  SANDBOX_RUNTIME: z.preprocess(
    emptyAsUndefined,
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/)
      .optional(),
  ),
  /**
   * sudo for the sandbox's user: `auto`, only on engines that map root to an unprivileged user
   * (userns-remap, rootless Docker) or under gVisor (SANDBOX_RUNTIME=runsc); `force`, on any engine
   * (a sandbox's root is then the host's root, capabilities aside; logged loudly); `off`, nowhere.
   */
  SANDBOX_SUDO: z.enum(["auto", "force", "off"]).default("auto"),
  /** What a sandbox reaches besides the git hosts and DNS: nothing, the public internet, or SANDBOX_EGRESS_ALLOW only. */
  SANDBOX_EGRESS: z.enum(["none", "public", "allowlist"]).default("public"),
  /**
   * Reachable in every SANDBOX_EGRESS mode, private ranges included. Host names are resolved when
   * the rules are written and again every SANDBOX_EGRESS_REFRESH_MS; one that does not resolve is
   * retried and reported in /ready, and the rest of the policy holds.
   */
  SANDBOX_EGRESS_ALLOW: hostList.default([]),
  /** How often the egress policy's host names are resolved again (their addresses may move). */
  SANDBOX_EGRESS_REFRESH_MS: z.coerce.number().int().min(1000).max(86_400_000).default(60_000),
  /** false: no egress rules are installed (the host's own firewall holds the sandboxes in). */
  SANDBOX_EGRESS_ENFORCE: flag.default(true),
};

export type SandboxSettings = z.output<z.ZodObject<typeof sandboxConfigFields>>;

/**
 * The containment the settings ask for; `services` are the git hosts. The worker clones, not the
 * sandbox, so in `public` mode they need no rule of their own (and no name to resolve): a sandbox
 * reaches public ones as it reaches the rest of the internet. In `none` and `allowlist` they stay
 * reachable, as the one thing a closed sandbox may still fetch from.
 */
export const sandboxContainmentOf = (
  settings: SandboxSettings,
  services: SandboxEgress["services"] = [],
): SandboxContainment => ({
  ...(settings.SANDBOX_DISK_ENFORCE ? { diskMb: settings.SANDBOX_DISK_MB } : {}),
  ...(settings.SANDBOX_RUNTIME ? { runtime: settings.SANDBOX_RUNTIME } : {}),
  sudo: settings.SANDBOX_SUDO,
  ...(settings.SANDBOX_EGRESS_ENFORCE
    ? {
        egress: {
          mode: settings.SANDBOX_EGRESS,
          services: settings.SANDBOX_EGRESS === "public" ? [] : services,
          allow: settings.SANDBOX_EGRESS_ALLOW,
          refreshMs: settings.SANDBOX_EGRESS_REFRESH_MS,
        },
      }
    : {}),
});

/** The driver configuration the parsed settings name, holding its sandboxes in as they ask. */
export const sandboxDriverConfig = (
  settings: SandboxSettings,
  services: SandboxEgress["services"] = [],
): SandboxDriverConfig => {
  switch (settings.SANDBOX_DRIVER) {
    case "docker":
      return {
        driver: "docker",
        engine: dockerEngineFromEnv(settings),
        network: settings.SANDBOX_NETWORK,
        containment: sandboxContainmentOf(settings, services),
        ...(settings.ENGINE_ID ? { engineId: settings.ENGINE_ID } : {}),
      };
  }
};

const OPT_OUT: Record<ContainmentError["part"], [variable: string, optOut: string]> = {
  disk: ["SANDBOX_DISK_MB", "or set SANDBOX_DISK_ENFORCE=false to run sandboxes without a disk limit"],
  runtime: ["SANDBOX_RUNTIME", "or unset SANDBOX_RUNTIME"],
  egress: ["SANDBOX_EGRESS", "or set SANDBOX_EGRESS_ENFORCE=false if the host's own firewall holds the sandboxes in"],
};

/** A containment the backend cannot provide, as the configuration error that stops the process, naming the way out. */
export const containmentConfigError = (err: ContainmentError): ConfigError => {
  const [variable, optOut] = OPT_OUT[err.part];
  return new ConfigError(variable, `${err.message}; ${optOut}`);
};
