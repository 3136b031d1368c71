export * from "./client.ts";
export type { components, paths } from "./openapi.ts";
export type * from "./types.ts";
