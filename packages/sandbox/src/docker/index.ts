// `@tern/sandbox/docker`: Docker facts behind the driver interface, for Docker-specific tests, the
// bench's floor and the egress rules' own tests. The worker uses only `@tern/sandbox`.
export type { DiskLimitSupport } from "./capabilities.ts";
export {
  applyEgressPolicy,
  type EgressPolicy,
  hostNetworks,
  hostResolvers,
  removeEgressPolicy,
  type SandboxBridge,
} from "./egress.ts";
export type { DockerEngine } from "./engine.ts";
export { createDockerProbe, type DockerProbe, type RawContainer } from "./probe.ts";
