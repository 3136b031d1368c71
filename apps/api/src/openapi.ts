import type { Logger, SecretBox } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues } from "@tern/queue";
import type { QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import { createApp } from "./app.ts";
import { loadApiConfig } from "./config.ts";
import type { ApiDeps } from "./deps.ts";
import type { KeyUsage } from "./middleware/key-usage.ts";
import { openApiDocumentConfig } from "./routes/docs.ts";

/**
 * A dependency that must not be used: building the document registers routes but runs no
 * handler, so anything that reaches for a client is a bug worth a loud error.
 */
const unusable = <T extends object>(name: string, known: Partial<T> = {}): T =>
  new Proxy(known as T, {
    get: (target, prop) => {
      if (prop in target) return target[prop as keyof T];
      throw new Error(`${name}.${String(prop)} is not available while building the OpenAPI document`);
    },
  });

/**
 * The API's OpenAPI document, built in this process from the routes themselves, with no server,
 * database or Redis: what the SDK's types are generated from.
 */
export const buildOpenApiDocument = (publicUrl = "http://localhost:3000") => {
  const deps: ApiDeps = {
    config: { ...loadApiConfig({}), publicUrl, cursorSecret: "unused" },
    db: unusable<Kysely<Database>>("db"),
    redis: unusable<Redis>("redis"),
    // bull-board is given the queues when it is mounted: none, here.
    queues: unusable<Queues>("queues", { all: [] }),
    logger: unusable<Logger>("logger"),
    secretBox: unusable<SecretBox>("secretBox"),
    keyUsage: unusable<KeyUsage>("keyUsage"),
    sandboxEvents: unusable<QueueEvents>("sandboxEvents"),
    workerAccess: { prefix: "unused", token: "unused" },
    // The limiter would set up its Redis scripts; no request is served here.
    rateLimiter: null,
  };
  return createApp(deps).getOpenAPI31Document(openApiDocumentConfig(publicUrl));
};
