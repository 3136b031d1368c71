export * from "./client.ts";
export type * from "./types.ts";
