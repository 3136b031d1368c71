export * from "./database.ts";
export * from "./processes.ts";
export * from "./redis.ts";
