import { Counter, Gauge, Histogram } from "prom-client";
import { metricsRegistry } from "./metrics.ts";

const registers = [metricsRegistry];

/**
 * What says a process can do its job, or why not: which disk limit and egress names hold a
 * worker's sandboxes, and whether the API has any worker to take its starts.
 */
export const healthMetrics = {
  /** 1 for the mode in force (hard, watched, off), 0 for the others. */
  sandboxDiskLimitMode: new Gauge({
    name: "tern_sandbox_disk_limit_mode",
    help: "The sandboxes' disk limit in force: hard (the engine's own), watched (sampled by the worker) or off",
    labelNames: ["mode"] as const,
    registers,
  }),
  sandboxRootMode: new Gauge({
    name: "tern_sandbox_root_mode",
    help:
      "Root in this worker's sandboxes: sudo (an engine that maps root to an unprivileged user, gVisor, or forced) " +
      "or none; safety says what makes root safe (userns-remap, rootless, runsc, or none), forced is SANDBOX_SUDO=force",
    labelNames: ["mode", "safety", "forced"] as const,
    registers,
  }),
  sandboxDiskLimitBytes: new Gauge({
    name: "tern_sandbox_disk_limit_bytes",
    help: "Each sandbox's disk limit (0: none)",
    registers,
  }),
  sandboxDiskSamples: new Histogram({
    name: "tern_sandbox_disk_sample_seconds",
    help: "Time to measure what one sandbox wrote (watched disk limit)",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers,
  }),
  sandboxDiskStops: new Counter({
    name: "tern_sandbox_disk_limit_stops_total",
    help: "Sandboxes paused by the watched disk limit for writing past it",
    registers,
  }),
  egressUnresolvedNames: new Gauge({
    name: "tern_sandbox_egress_unresolved_names",
    help: "Host names of the egress policy that do not resolve (their rules are missing; retried)",
    registers,
  }),
  workersAlive: new Gauge({
    name: "tern_workers_alive",
    help: "Workers advertised in the worker directory (the API's view)",
    registers,
  }),
  startsWaitingForWorker: new Gauge({
    name: "tern_starts_waiting_for_worker",
    help: "Start tasks accepted while no worker was alive, still waiting for one",
    registers,
  }),
};
