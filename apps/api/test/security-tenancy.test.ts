import { toHexId } from "@tern/core";
import { createConversationFixture, seedEvents } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";
import {
  answerText,
  fillPath,
  type OpenApiDocument,
  type Operation,
  operationsOf,
  sampleOf,
} from "./openapi-operations.ts";

/**
 * The cross-tenant matrix: every operation of the API's own OpenAPI document (so a route added
 * later is in it without a change here), asked by Bob with each of Alice's ids. An operation
 * that takes an id answers 404 (a batch answers null), and no answer to Bob ever carries
 * anything of Alice's: her ids, titles, keys.
 */

let api: TestApi;
let doc: OpenApiDocument;
let alice: { key: string; userId: string };
let bob: { key: string; userId: string };
/** Alice's ids as the API writes them, each tried in every id slot. */
const aliceIds: Record<string, string> = {};
/** Everything of Alice's that must never reach Bob, in every form it is stored or written. */
const secrets: string[] = [];

const ID_QUERY = /^ids?$/;
const isIdParam = (name: string) => name === "id" || name.endsWith("_id");

beforeAll(async () => {
  api = await startTestApi();
  doc = (await (await api.call("/openapi.json")).json()) as OpenApiDocument;
  alice = await api.newUser();
  bob = await api.newUser();

  // One of each thing Alice can own: a conversation with events, a start task of her own, a key.
  const conversation = await createConversationFixture(api.database.db, {
    userId: alice.userId,
    title: "alice-secret-conversation",
  });
  await seedEvents(api.database.db, conversation.conversationId, 5);
  const started = await api.call("/api/v1/app-conversations", {
    key: alice.key,
    method: "POST",
    json: { title: "alice-secret-start", initial_message: { role: "user", content: [{ type: "text", text: "hi" }] } },
  });
  expect(started.status).toBe(200);
  const task = (await started.json()) as { id: string };
  const made = await api.call("/api/keys", { key: alice.key, method: "POST", json: { name: "alice-secret-key" } });
  expect(made.status).toBe(201);
  const key = (await made.json()) as { id: string; key: string };
  const hooked = await api.call("/api/v1/webhooks", {
    key: alice.key,
    method: "POST",
    json: { url: "https://93.184.216.34/alice-secret-hook", events: ["conversation.event"] },
  });
  expect(hooked.status).toBe(201);
  const webhook = (await hooked.json()) as { id: string; secret: string };

  Object.assign(aliceIds, {
    conversation: toHexId(conversation.conversationId),
    fixtureTask: toHexId(conversation.taskId),
    startedTask: task.id,
    key: key.id,
    webhook: webhook.id,
  });
  secrets.push(
    ...Object.values(aliceIds),
    conversation.conversationId,
    conversation.taskId,
    conversation.sessionApiKey,
    key.key,
    webhook.secret,
    "alice-secret-hook",
    alice.key,
    toHexId(alice.userId),
    alice.userId,
    "alice-secret-conversation",
    "alice-secret-start",
    "alice-secret-key",
  );
});

afterAll(async () => api?.close());

interface Asked {
  op: Operation;
  slot: string;
  id: string;
  status: number;
  text: string;
}

/** One request of Bob's: `ids` fills the id slots, every other parameter and the body get valid samples. */
const askAsBob = async (op: Operation, ids: Record<string, string | string[]>): Promise<Response> => {
  const pathValues: Record<string, string> = {};
  const query = new URLSearchParams();
  for (const p of op.parameters) {
    const given = ids[p.name];
    if (p.in === "path") pathValues[p.name] = String(given ?? sampleOf(doc, p.schema ?? {}));
    else if (p.in === "query" && given !== undefined) for (const v of [given].flat()) query.append(p.name, v);
    else if (p.in === "query" && p.required) query.append(p.name, String(sampleOf(doc, p.schema ?? {})));
  }
  const qs = query.size > 0 ? `?${query}` : "";
  return api.call(`${fillPath(op.path, pathValues)}${qs}`, {
    key: bob.key,
    method: op.method,
    ...(op.body ? { json: sampleOf(doc, op.body) } : {}),
  });
};

const noSecretIn = (a: Asked) => {
  for (const s of secrets) {
    if (a.text.includes(s)) throw new Error(`${a.op.method} ${a.op.path} (${a.slot}=${a.id}) answered Bob with ${s}`);
  }
};

describe("the cross-tenant matrix, every route of the OpenAPI document", () => {
  it("answers Bob 404 or null for each of Alice's ids, and never anything of hers", async () => {
    const ops = operationsOf(doc);
    const covered = new Set<string>();
    const asked: Asked[] = [];
    for (const op of ops) {
      const slots = op.parameters.filter(
        (p) => (p.in === "path" && isIdParam(p.name)) || (p.in === "query" && ID_QUERY.test(p.name)),
      );
      if (slots.length === 0) {
        // Lists, searches, creations, health: Bob's own answer holds nothing of Alice's.
        const res = await askAsBob(op, {});
        asked.push({ op, slot: "-", id: "-", status: res.status, text: await answerText(op, res) });
        continue;
      }
      covered.add(`${op.method} ${op.path}`);
      for (const slot of slots) {
        const tries: (string | string[])[] = [...Object.values(aliceIds), Object.values(aliceIds)];
        for (const id of tries) {
          if (slot.in === "path" && Array.isArray(id)) continue;
          const res = await askAsBob(op, { [slot.name]: id });
          const text = await answerText(op, res);
          const a: Asked = { op, slot: slot.name, id: [id].flat().join(","), status: res.status, text };
          asked.push(a);
          const where = `${op.method} ${op.path} ${slot.name}=${a.id}: ${res.status} ${text.slice(0, 200)}`;
          if (slot.in === "path") {
            expect(res.status, where).toBe(404);
            expect((JSON.parse(text) as { error?: { code?: string } }).error?.code, where).toBeTypeOf("string");
          } else if (op.parameters.some((p) => p.in === "path" && isIdParam(p.name))) {
            // A batch under a resource named in the path (the events of a conversation): the path
            // holds a sample id, a resource Bob does not have, so the whole answer is 404.
            expect(res.status, where).toBe(404);
          } else {
            // A batch: one null per id asked, in order.
            expect(res.status, where).toBe(200);
            const body = JSON.parse(text) as unknown[];
            expect(body, where).toEqual([id].flat().map(() => null));
          }
        }
      }
    }
    for (const a of asked) noSecretIn(a);
    // Every route that takes an id is in the matrix; today's routes at least.
    expect(covered.size).toBeGreaterThanOrEqual(8);
    console.log(
      `tenancy matrix: ${ops.length} operations asked, ${covered.size} with an id slot, ${asked.length} requests`,
    );

    // Nothing Bob asked for changed Alice's things: her conversation, task and key are still hers.
    const convs = await api.call(`/api/v1/app-conversations?ids=${aliceIds.conversation}`, { key: alice.key });
    expect(((await convs.json()) as ({ title: string } | null)[])[0]?.title).toBe("alice-secret-conversation");
    const keys = (await (await api.call("/api/keys", { key: alice.key })).json()) as { id: string }[];
    expect(keys.map((k) => k.id)).toContain(aliceIds.key);
  });
});
