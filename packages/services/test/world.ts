import { createLogger } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { createQueues, createRedis, type Queues } from "@tern/queue";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type TestDatabase,
  testRedisUrl,
} from "@tern/testing";
import type { ServiceDeps } from "../src/index.ts";

type Queue = Queues["start"];

/** One test file's resources: its own database and Redis prefix, and the deps the services take. */
export interface ServiceWorld {
  database: TestDatabase;
  deps: ServiceDeps;
  /** A conversation whose sandbox is up (RUNNING), so the agent may run in it. */
  conversationWithSandbox: () => Promise<{ userId: string; conversationId: string; sessionApiKey: string }>;
  close: () => Promise<void>;
}

export const createServiceWorld = async (): Promise<ServiceWorld> => {
  const database = await createTestDatabase();
  const prefix = createRedisPrefix();
  const redis = createRedis(testRedisUrl(), "producer");
  await new Promise<void>((resolve, reject) => {
    redis.once("ready", resolve);
    redis.once("error", reject);
  });
  const queues = createQueues(redis, prefix);
  const deps: ServiceDeps = {
    db: database.db,
    queues,
    redis,
    logger: createLogger("services-test", "silent"),
    queueTimeoutMs: 500,
  };
  return {
    database,
    deps,
    async conversationWithSandbox() {
      const fixture = await createConversationFixture(database.db);
      const sandbox = await sandboxesRepository(database.db).upsert({
        name: `services-test-${fixture.conversationId}`,
        image: "test",
        startTaskId: fixture.taskId,
        conversationId: fixture.conversationId,
        status: "RUNNING",
      });
      await database.db
        .updateTable("conversations")
        .set({ sandbox_id: sandbox.id })
        .where("id", "=", fixture.conversationId)
        .execute();
      return fixture;
    },
    async close() {
      await queues.close();
      redis.disconnect();
      await deleteRedisPrefix(prefix);
      await database.drop();
    },
  };
};

/**
 * Makes `queue.add` behave as `fake` for the length of `fn`; counts the calls. The real add is
 * handed to `fake`, so a test can look at the world just before a job is added.
 */
export const withAdd = async <T>(
  queue: Queue,
  fake: (realAdd: Queue["add"]) => Queue["add"],
  fn: () => Promise<T>,
): Promise<{ result: PromiseSettledResult<T>; calls: number }> => {
  const real = queue.add.bind(queue);
  let calls = 0;
  const replaced = fake(real);
  queue.add = ((...args: Parameters<Queue["add"]>) => {
    calls++;
    return replaced(...args);
  }) as Queue["add"];
  try {
    const [result] = await Promise.allSettled([fn()]);
    return { result: result as PromiseSettledResult<T>, calls };
  } finally {
    queue.add = real;
  }
};

/** A connection that is not up (reconnecting), standing in for the producer's while Redis is down. */
export const downRedis = { status: "reconnecting" } as ServiceDeps["redis"];
