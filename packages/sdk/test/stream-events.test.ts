import { eventsRepository } from "@tern/db";
import {
  createConversationFixture,
  freePort,
  type ServiceProcess,
  sampleEvent,
  scaled,
  startStack,
  type TestStack,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type StreamedEvent, TernApiError } from "../src/index.ts";

/** streamEvents() against real API processes: one is stopped mid-stream and another takes its port. */
let stack: TestStack;
let api: ServiceProcess;
let port: string;
const startApi = () => stack.startApi({ PORT: port });

beforeAll(async () => {
  stack = await startStack();
  port = String(await freePort());
  api = await startApi();
}, scaled(60_000));
afterAll(async () => stack?.close());

describe("streamEvents()", () => {
  it("yields every event exactly once, resuming by itself across an API restart", async () => {
    const { userId, key } = await stack.newUser({ name: "sdk" });
    const { conversationId } = await createConversationFixture(stack.database.db, { userId });
    const client = createClient({ baseUrl: api.url, apiKey: key });
    const append = (from: number, n: number) =>
      eventsRepository(stack.database.db).append(
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
    const all = (await eventsRepository(stack.database.db).listAll(conversationId)).map((e) => e.id);
    expect(seen.map((e) => e.event.id)).toEqual(all);
  });

  it("throws a final error (another user's conversation) instead of retrying", async () => {
    const owner = await stack.newUser({ name: "a" });
    const other = await stack.newUser({ name: "b" });
    const { conversationId } = await createConversationFixture(stack.database.db, { userId: owner.userId });
    const client = createClient({ baseUrl: api.url, apiKey: other.key });
    const it = client.streamEvents(conversationId);
    await expect(it.next()).rejects.toBeInstanceOf(TernApiError);
  });
});
