export * from "./database.ts";
export * from "./docker.ts";
export * from "./git-server.ts";
export * from "./llm-server.ts";
export * from "./processes.ts";
export * from "./redis.ts";
export * from "./seed-events.ts";
export * from "./users.ts";
