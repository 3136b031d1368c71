export * from "./database.ts";
export * from "./processes.ts";
export * from "./redis.ts";
export * from "./seed-events.ts";
