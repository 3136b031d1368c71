export * from "./connection.ts";
export * from "./migrate.ts";
export * from "./repositories/api-keys.ts";
export * from "./repositories/conversations.ts";
export * from "./repositories/events.ts";
export * from "./repositories/sandboxes.ts";
export * from "./repositories/start-tasks.ts";
export * from "./repositories/users.ts";
export type { Database } from "./schema.ts";
