export * from "./api-key-secret.ts";
export * from "./config.ts";
export * from "./domain.ts";
export * from "./errors.ts";
export * from "./ids.ts";
export * from "./logger.ts";
