import { DEFAULT_API_KEY_MAX_LIFETIME_DAYS } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { createUserWithKey } from "@tern/services";
import {
  createConversationFixture,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  freePort,
  type ServiceProcess,
  sampleEvent,
  scaled,
  startService,
  type TestDatabase,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type StreamedEvent, TernApiError } from "../src/index.ts";

/** streamEvents() against real API processes: one is stopped mid-stream and another takes its port. */
let database: TestDatabase;
let api: ServiceProcess;
let port: string;
const prefix = createRedisPrefix();
const startApi = () => startService("api", { DATABASE_URL: database.url, REDIS_PREFIX: prefix, PORT: port });

beforeAll(async () => {
  database = await createTestDatabase();
  port = String(await freePort());
  api = await startApi();
}, scaled(60_000));
afterAll(async () => {
  await api?.stop();
  await database?.drop();
  await deleteRedisPrefix(prefix);
});

describe("streamEvents()", () => {
  it("yields every event exactly once, resuming by itself across an API restart", async () => {
    const { userId, key } = await createUserWithKey(
      { db: database.db, maxKeyLifetimeDays: DEFAULT_API_KEY_MAX_LIFETIME_DAYS },
      { name: "sdk" },
    );
    const { conversationId } = await createConversationFixture(database.db, { userId });
    const client = createClient({ baseUrl: api.url, apiKey: key });
    const append = (from: number, n: number) =>
      eventsRepository(database.db).append(
        conversationId,
        Array.from({ length: n }, (_, i) => sampleEvent("MessageEvent", from + i)),
      );
    await append(0, 5);
    const seen: StreamedEvent[] = [];
    const stop = new AbortController();
    const reading = (async () => {
      for await (const e of client.streamEvents(conversationId, { signal: stop.signal, retryMs: 100 })) seen.push(e);
    })();
    await waitFor(() => seen.length === 5, { what: "the stored events" });
    await append(5, 5);
    await waitFor(() => seen.length === 10, { what: "the live events" });

    await api.stop(); // its streams close cleanly; the iterator keeps trying
    await append(10, 5); // appended while no API runs
    api = await startApi();
    await append(15, 5);
    await waitFor(() => seen.length >= 20, { what: "every event after the restart", timeoutMs: 30_000 });
    stop.abort();
    await reading;
    const all = (await eventsRepository(database.db).listAll(conversationId)).map((e) => e.id);
    expect(seen.map((e) => e.event.id)).toEqual(all);
  });

  it("throws a final error (another user's conversation) instead of retrying", async () => {
    const owner = await createUserWithKey({ db: database.db, maxKeyLifetimeDays: 30 }, { name: "a" });
    const other = await createUserWithKey({ db: database.db, maxKeyLifetimeDays: 30 }, { name: "b" });
    const { conversationId } = await createConversationFixture(database.db, { userId: owner.userId });
    const client = createClient({ baseUrl: api.url, apiKey: other.key });
    const it = client.streamEvents(conversationId);
    await expect(it.next()).rejects.toBeInstanceOf(TernApiError);
  });
});
