export * from "./docker/driver.ts";
export * from "./docker/network.ts";
export * from "./driver.ts";
export * from "./pool.ts";
