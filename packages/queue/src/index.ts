export * from "./agent-run-jobs.ts";
export * from "./agent-runs.ts";
export * from "./catalog.ts";
export * from "./connection.ts";
export * from "./queues.ts";
export * from "./sandbox-removal.ts";
