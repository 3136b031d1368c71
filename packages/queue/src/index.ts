export * from "./catalog.ts";
export * from "./connection.ts";
export * from "./queues.ts";
export * from "./run-interrupts.ts";
export * from "./worker-directory.ts";
