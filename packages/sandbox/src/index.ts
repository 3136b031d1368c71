export * from "./config.ts";
export * from "./create-driver.ts";
export * from "./disk-watch.ts";
export { type DockerEngine, dockerEngineFromEnv } from "./docker/engine.ts";
export * from "./driver.ts";
export * from "./pool.ts";
export * from "./pool-sizing.ts";
export type * from "./pool-store.ts";
export * from "./traced.ts";
