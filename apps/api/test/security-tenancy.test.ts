import { toHexId } from "@tern/core";
import { conversationsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import {
  createConversationFixture,
  createSandboxedConversation,
  scaled,
  seedEvents,
  testSandboxDriver,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routeKey } from "./agent-server-contract.ts";
import {
  type AgentIds,
  type AgentRequest,
  agentInit,
  agentPath,
  keyedAgentRoutes,
  queryString,
  validAgentRequest,
} from "./agent-server-operations.ts";
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
 * The cross-tenant matrix: every operation of the API's own OpenAPI document, asked by Bob with each
 * of Alice's ids. An operation that takes an id answers 404 (a batch answers null), and no answer to
 * Bob ever carries anything of Alice's: her ids, titles, keys.
 *
 * Its positive control: every operation that takes an id is listed in OWNER_CALLS, with the ids of
 * Alice's that fill it and what Alice herself gets (never a 404); the same call is asked by Bob
 * (404) and then by Alice. A route answering 404 to everyone fails, and so does a route with an id
 * that is not listed here: a new one must say what its owner gets.
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

type Ids = Record<string, string | string[]>;

/** Makes a thing of Alice's that a call may destroy or change, so the others keep theirs. */
const fresh = {
  async conversation() {
    const c = await createConversationFixture(api.database.db, { userId: alice.userId, title: "alice-secret-fresh" });
    secrets.push(toHexId(c.conversationId), c.conversationId, c.sessionApiKey);
    return toHexId(c.conversationId);
  },
  async key() {
    const made = await api.call("/api/keys", { key: alice.key, method: "POST", json: { name: "alice-secret-fresh" } });
    expect(made.status).toBe(201);
    const k = (await made.json()) as { id: string; key: string };
    secrets.push(k.id, k.key);
    return k.id;
  },
  async webhook() {
    const made = await api.call("/api/v1/webhooks", {
      key: alice.key,
      method: "POST",
      json: { url: "https://93.184.216.34/alice-secret-hook", events: ["conversation.event"] },
    });
    expect(made.status).toBe(201);
    const w = (await made.json()) as { id: string; secret: string };
    secrets.push(w.id, w.secret);
    return w.id;
  },
  async gitProvider() {
    const made = await api.call("/api/v1/git/providers", {
      key: alice.key,
      method: "POST",
      json: { provider: "gitlab", token: "alice-secret-git-token", host: "gitlab.example.com" },
    });
    expect(made.status).toBe(201);
    const g = (await made.json()) as { id: string };
    secrets.push(g.id, "alice-secret-git-token");
    return g.id;
  },
  /** A sandbox of Alice's whose start failed and left it STARTING: the sandbox commands refuse it (409), as hers. */
  async sandbox() {
    const task = await startTasksRepository(api.database.db).create(alice.userId, {});
    const row = await sandboxesRepository(api.database.db).upsert({
      name: `tern-test-tenancy-${task.id}`,
      image: "tern-sandbox:latest",
      startTaskId: task.id,
      status: "STARTING",
    });
    await startTasksRepository(api.database.db).markError(task.id, "test fixture");
    secrets.push(toHexId(row.id), row.id, toHexId(task.id), task.id);
    return toHexId(row.id);
  },
};

interface OwnerCall {
  /** Alice's ids for the call's id slots. */
  ids: () => Ids | Promise<Ids>;
  /** What Alice gets: never 404. A batch's answer has no null in it. */
  status: number;
}

/**
 * Every operation with an id (in the path, or `id`/`ids` in the query) of the OpenAPI document, and
 * what its owner gets. A fixture conversation has no sandbox: the calls that need one answer as for
 * a conversation of yours whose sandbox is gone (410). This API has no stream hub: a stream answers
 * its owner 503, after the ownership check (a stranger gets 404 first). A sandbox whose start is
 * still going on refuses commands (409).
 */
const OWNER_CALLS: Record<string, OwnerCall> = {
  "DELETE /api/keys/{id}": { ids: async () => ({ id: await fresh.key() }), status: 200 },
  "GET /api/v1/app-conversations": { ids: () => ({ ids: [aliceIds.conversation!] }), status: 200 },
  "GET /api/v1/app-conversations/start-tasks": {
    ids: () => ({ ids: [aliceIds.fixtureTask!, aliceIds.startedTask!] }),
    status: 200,
  },
  "GET /api/v1/app-conversations/{conversation_id}/file": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 410,
  },
  "GET /api/v1/app-conversations/{conversation_id}/skills": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 200,
  },
  "GET /api/v1/app-conversations/{conversation_id}/hooks": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 200,
  },
  "GET /api/v1/app-conversations/{conversation_id}/download": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 200,
  },
  "GET /api/v1/app-conversations/{conversation_id}/diff": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 410,
  },
  "GET /api/v1/app-conversations/{conversation_id}/workspace.tar.gz": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 410,
  },
  "PATCH /api/v1/app-conversations/{conversation_id}": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  "DELETE /api/v1/app-conversations/{conversation_id}": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  "POST /api/v1/app-conversations/{conversation_id}/send-message": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 410,
  },
  "GET /api/v1/conversation/{conversation_id}/events/search": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 200,
  },
  "GET /api/v1/conversation/{conversation_id}/events/count": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 200,
  },
  "GET /api/v1/conversation/{conversation_id}/events": {
    ids: () => ({ conversation_id: aliceIds.conversation!, id: [aliceIds.event!] }),
    status: 200,
  },
  "POST /api/v1/conversation/{conversation_id}/events": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  "GET /api/v1/conversation/{conversation_id}/events/stream": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 503,
  },
  "GET /api/v1/app-conversations/start-tasks/{task_id}/stream": {
    ids: () => ({ task_id: aliceIds.fixtureTask! }),
    status: 503,
  },
  "POST /api/v1/conversation/{conversation_id}/pause": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  "POST /api/v1/conversation/{conversation_id}/interrupt": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  // Nothing waits for confirmation in a fresh conversation: its owner's answer is a 409.
  "POST /api/v1/conversation/{conversation_id}/events/respond_to_confirmation": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 409,
  },
  "POST /api/v1/conversation/{conversation_id}/confirmation-policy": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  "POST /api/v1/conversation/{conversation_id}/confirmation_policy": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 200,
  },
  "POST /api/v1/conversation/{conversation_id}/run": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 409,
  },
  "POST /api/v1/conversations/{conversation_id}/pending-messages": {
    ids: async () => ({ conversation_id: await fresh.conversation() }),
    status: 409,
  },
  "GET /api/v1/sandboxes": { ids: async () => ({ id: [await fresh.sandbox()] }), status: 200 },
  "POST /api/v1/sandboxes/{id}/pause": { ids: async () => ({ id: await fresh.sandbox() }), status: 409 },
  "POST /api/v1/sandboxes/{id}/resume": { ids: async () => ({ id: await fresh.sandbox() }), status: 409 },
  "DELETE /api/v1/sandboxes/{id}": { ids: async () => ({ id: await fresh.sandbox() }), status: 409 },
  "DELETE /api/v1/webhooks/{id}": { ids: async () => ({ id: await fresh.webhook() }), status: 200 },
  "GET /api/v1/webhooks/{id}/deliveries": { ids: () => ({ id: aliceIds.webhook! }), status: 200 },
  "DELETE /api/v1/git/providers/{id}": { ids: async () => ({ id: await fresh.gitProvider() }), status: 200 },
  "POST /api/v1/app-conversations/{conversation_id}/read-only-key": {
    ids: () => ({ conversation_id: aliceIds.conversation! }),
    status: 200,
  },
};

/**
 * The error code an owner's non-2xx answer carries: the refusal is the one the route documents for
 * its owner (a sandbox gone, a stream hub absent, a run in the way), not some other error that
 * happens to share the status.
 */
const OWNER_ERROR_CODES: Record<number, string> = { 409: "conflict", 410: "gone", 503: "service_unavailable" };

/** Operations with an id that names nothing a user owns: every user gets the same answer. */
const SHARED_IDS: Record<string, string> = {
  "GET /api/v1/sandbox-specs": "a sandbox spec is an image the deployment offers to everyone",
};

/**
 * Operations only a sandbox's own session key opens: every API key, Alice's included,
 * gets 401 before any id is looked up, so Bob's answer cannot tell her ids from unknown ones.
 * apps/worker/test/sandbox-start.test.ts proves another sandbox's key is refused (401) too.
 */
const SANDBOX_KEY_ONLY: Record<string, string> = {
  "GET /api/v1/sandboxes/{id}/settings/secrets": "the secrets a sandbox's agent server reads",
  "GET /api/v1/sandboxes/{id}/settings/secrets/{name}": "one secret's value, for a sandbox's agent server",
};

/**
 * Operations only an admin key opens: every user's key, Alice's included, gets 403 before any id
 * is looked up, so Bob's answer cannot tell her ids from unknown ones.
 */
const ADMIN_ONLY: Record<string, string> = {
  "DELETE /api/v1/sandbox-specs": "a spec is the deployment's, removed by an admin",
};

const listed = (r: string) => r in OWNER_CALLS || r in SHARED_IDS || r in SANDBOX_KEY_ONLY || r in ADMIN_ONLY;

const idSlotsOf = (op: Operation) =>
  op.parameters.filter((p) => (p.in === "path" && isIdParam(p.name)) || (p.in === "query" && ID_QUERY.test(p.name)));

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

  const events = await api.call(`/api/v1/conversation/${toHexId(conversation.conversationId)}/events/search`, {
    key: alice.key,
  });
  expect(events.status).toBe(200);
  const [event] = ((await events.json()) as { items: { id: string }[] }).items;

  Object.assign(aliceIds, {
    event: event!.id,
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

/** One request of `who`'s: `ids` fills the id slots, every other parameter and the body get valid samples. */
const ask = async (op: Operation, ids: Ids, who = bob): Promise<Response> => {
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
    key: who.key,
    method: op.method,
    ...(op.body ? { json: sampleOf(doc, op.body) } : {}),
  });
};

const noSecretIn = (a: Asked) => {
  for (const s of secrets) {
    if (a.text.includes(s)) throw new Error(`${a.op.method} ${a.op.path} (${a.slot}=${a.id}) answered Bob with ${s}`);
  }
};

/** The status only: a stream is cancelled at once (it would go on until its conversation ends). */
const statusOf = async (op: Operation, res: Response) => {
  const text = op.path.endsWith("/stream") && res.status === 200 ? "" : await answerText(op, res);
  await res.body?.cancel().catch(() => undefined);
  return { status: res.status, text };
};

describe("the cross-tenant matrix, every route of the OpenAPI document", () => {
  it("lists every operation with an id, and each listed one is in the document", () => {
    const withIds = operationsOf(doc)
      .filter((op) => idSlotsOf(op).length > 0)
      .map((op) => `${op.method} ${op.path}`);
    expect(
      withIds.filter((r) => !listed(r)),
      "routes with an id, not listed",
    ).toEqual([]);
    expect(
      [
        ...Object.keys(OWNER_CALLS),
        ...Object.keys(SHARED_IDS),
        ...Object.keys(SANDBOX_KEY_ONLY),
        ...Object.keys(ADMIN_ONLY),
      ].filter((r) => !withIds.includes(r)),
      "listed, but not in the document",
    ).toEqual([]);
    // The positive control is only one if the owner's expected answer is not the stranger's.
    expect(
      Object.entries(OWNER_CALLS)
        .filter(([, c]) => c.status === 404 || (c.status >= 400 && !(c.status in OWNER_ERROR_CODES)))
        .map(([r]) => r),
      "owner answers that are 404 or have no expected code",
    ).toEqual([]);
    console.log(
      `tenancy matrix covers ${withIds.length} operations with an id (owner's status):\n  ${withIds
        .map((r) => `${r} -> ${OWNER_CALLS[r]?.status ?? "shared"}`)
        .join("\n  ")}`,
    );
  });

  it("for each operation with an id: Bob gets 404 (a batch: nulls) and Alice, the owner, gets what she asked for", async () => {
    const failures: string[] = [];
    for (const op of operationsOf(doc).filter((o) => `${o.method} ${o.path}` in OWNER_CALLS)) {
      const route = `${op.method} ${op.path}`;
      const call = OWNER_CALLS[route]!;
      const ids = await call.ids();
      const pathIds = idSlotsOf(op).some((p) => p.in === "path");
      const batch = idSlotsOf(op).some((p) => p.in === "query");
      // Bob first: a call that destroys what it names must find it still there for Alice.
      const asBob = await statusOf(op, await ask(op, ids, bob));
      noSecretIn({ op, slot: Object.keys(ids).join(","), id: JSON.stringify(ids), ...asBob });
      if (pathIds) {
        if (asBob.status !== 404) failures.push(`${route} answered Bob ${asBob.status}: ${asBob.text.slice(0, 200)}`);
      } else if (asBob.status !== 200 || !(JSON.parse(asBob.text) as unknown[]).every((x) => x === null)) {
        failures.push(`${route} answered Bob ${asBob.status} ${asBob.text.slice(0, 200)}, not nulls`);
      }
      const asAlice = await statusOf(op, await ask(op, ids, alice));
      const aliceCode =
        asAlice.status >= 400 ? (JSON.parse(asAlice.text) as { error?: { code?: string } }).error?.code : undefined;
      if (asAlice.status !== call.status) {
        failures.push(`${route} answered Alice ${asAlice.status}, not ${call.status}: ${asAlice.text.slice(0, 200)}`);
      } else if (call.status >= 400 && aliceCode !== OWNER_ERROR_CODES[call.status]) {
        failures.push(
          `${route} answered Alice ${call.status} with code ${aliceCode}, not ${OWNER_ERROR_CODES[call.status]}`,
        );
      } else if (batch && (JSON.parse(asAlice.text) as unknown[]).some((x) => x === null)) {
        failures.push(`${route} answered Alice's own batch with a null: ${asAlice.text.slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it("answers Bob 404 or null for each of Alice's ids, and never anything of hers", async () => {
    const ops = operationsOf(doc);
    const covered = new Set<string>();
    const asked: Asked[] = [];
    for (const op of ops) {
      const slots = idSlotsOf(op);
      if (slots.length === 0) {
        // Lists, searches, creations, health: Bob's own answer holds nothing of Alice's.
        const res = await ask(op, {});
        asked.push({ op, slot: "-", id: "-", status: res.status, text: await answerText(op, res) });
        continue;
      }
      covered.add(`${op.method} ${op.path}`);
      const refusedFirst =
        `${op.method} ${op.path}` in SANDBOX_KEY_ONLY ? 401 : `${op.method} ${op.path}` in ADMIN_ONLY ? 403 : null;
      if (refusedFirst !== null) {
        const res = await ask(
          op,
          Object.fromEntries(slots.map((slot) => [slot.name, aliceIds.conversation as string])),
        );
        const text = await answerText(op, res);
        asked.push({ op, slot: "-", id: "-", status: res.status, text });
        expect(res.status, `${op.method} ${op.path}: ${text.slice(0, 200)}`).toBe(refusedFirst);
        continue;
      }
      for (const slot of slots) {
        const tries: (string | string[])[] = [...Object.values(aliceIds), Object.values(aliceIds)];
        for (const id of tries) {
          if (slot.in === "path" && Array.isArray(id)) continue;
          const res = await ask(op, { [slot.name]: id });
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
    // Every route that takes an id is in the matrix, and the matrix knows what its owner gets.
    expect(
      [...covered].filter((r) => !listed(r)),
      "routes with an id, not listed",
    ).toEqual([]);
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

/**
 * The same matrix over the agent-server mount (/agent/{sandbox_id}), every keyed route of the
 * committed contract that tern serves (agent-server-operations.ts), on real sandboxes and a worker.
 * Each route is asked four ways that must fail, then by its owner, who must succeed, in one test:
 * - no key, and the session key of another sandbox of the same owner: 401;
 * - another user's API key on the owner's sandbox: 404, as for a sandbox that does not exist;
 * - that user's key on his own sandbox, naming the owner's ids: 404, or a batch's nulls;
 * - then the owner's API key, with the same ids: the route's success (OWNER_AGENT_STATUS).
 * No answer to the other user carries anything of the owner's.
 */
describe("the cross-tenant matrix, every keyed route of the agent-server contract", () => {
  let agentApi: TestApi;
  let owner: { key: string; userId: string };
  let stranger: { key: string; userId: string };
  /** The owner's sandbox with a workspace (a real container) and the owner's other sandbox. */
  let ownSandbox: string;
  let otherSandboxKey: string;
  /** The stranger's own sandbox (a row: its routes refuse before they reach a container). */
  let strangerSandbox: string;
  const agentSecrets: string[] = [];
  const LLM_BASE_URL = "http://127.0.0.1:9/v1";

  /** What the owner gets: success, but for an answer to a confirmation when nothing waits (the rule's 409). */
  const OWNER_AGENT_STATUS: Record<string, number> = {
    "POST /api/conversations": 201,
    "POST /api/conversations/{conversation_id}/events/respond_to_confirmation": 409,
  };

  const sandboxRow = async (userId: string) => {
    const c = await createConversationFixture(agentApi.database.db, { userId, title: "agent-secret-other" });
    const sandbox = await sandboxesRepository(agentApi.database.db).upsert({
      name: `tern-test-agent-tenancy-${c.taskId}`,
      image: "tern-sandbox:latest",
      startTaskId: c.taskId,
      conversationId: c.conversationId,
      status: "RUNNING",
    });
    await agentApi.database.db
      .updateTable("conversations")
      .set({ sandbox_id: sandbox.id })
      .where("id", "=", c.conversationId)
      .execute();
    return { sandboxId: sandbox.id, sessionApiKey: c.sessionApiKey, conversationId: c.conversationId };
  };

  /** Fresh ids of the owner's in their sandbox: a conversation with an event, and a bash command. */
  const freshIds = async (): Promise<AgentIds> => {
    const c = await createConversationFixture(agentApi.database.db, {
      userId: owner.userId,
      title: "agent-secret-title",
    });
    await agentApi.database.db
      .updateTable("conversations")
      .set({ sandbox_id: ownSandbox })
      .where("id", "=", c.conversationId)
      .execute();
    await seedEvents(agentApi.database.db, c.conversationId, 1);
    const events = await asOwner(
      `/agent/${toHexId(ownSandbox)}/api/conversations/${toHexId(c.conversationId)}/events/search`,
    );
    const [event] = ((await events.json()) as { items: { id: string }[] }).items;
    // Waited for to its end: the sandbox's commands in flight stay under AGENT_BASH_MAX_IN_FLIGHT.
    const command = await asOwner(`/agent/${toHexId(ownSandbox)}/api/bash/execute_bash_command`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "echo agent-secret-output" }),
    });
    expect(command.status).toBe(200);
    const ids = {
      conversation_id: toHexId(c.conversationId),
      event_id: event?.id ?? "",
      bash_event_id: ((await command.json()) as { command_id: string }).command_id,
    };
    agentSecrets.push(...Object.values(ids), c.conversationId, c.sessionApiKey);
    return ids;
  };

  const asOwner = (path: string, init: RequestInit = {}) =>
    fetch(`${agentApi.url}${path}`, {
      ...init,
      headers: { ...(init.headers ?? {}), authorization: `Bearer ${owner.key}` },
    });

  beforeAll(async () => {
    const llmUrls = { LLM_USER_BASE_URLS: "http://127.0.0.1:9" };
    agentApi = await startTestApi({ worker: true, env: llmUrls, workerEnv: llmUrls });
    owner = await agentApi.newUser();
    stranger = await agentApi.newUser();
    const { conversationId } = await createSandboxedConversation({
      db: agentApi.database.db,
      sandboxes: testSandboxDriver(),
      namespace: agentApi.prefix,
      userId: owner.userId,
      tools: [],
    });
    ownSandbox = (await conversationsRepository(agentApi.database.db).get(conversationId))?.sandboxId ?? "";
    const other = await sandboxRow(owner.userId);
    otherSandboxKey = other.sessionApiKey;
    strangerSandbox = (await sandboxRow(stranger.userId)).sandboxId;
    agentSecrets.push(toHexId(ownSandbox), ownSandbox, toHexId(conversationId), conversationId, owner.key);
    agentSecrets.push("agent-secret-title", "agent-secret-output", toHexId(owner.userId), owner.userId);
  }, scaled(180_000));

  afterAll(async () => agentApi?.close());

  it("lists a valid request of its owner's for every keyed route the contract names and tern serves", () => {
    const routes = keyedAgentRoutes().map(routeKey);
    const probe = { conversation_id: "c", event_id: "e", bash_event_id: "b" };
    expect(routes.filter((r) => validAgentRequest(r, probe, LLM_BASE_URL) === undefined)).toEqual([]);
    expect(routes.length).toBeGreaterThanOrEqual(28);
    console.log(`agent-server tenancy matrix covers ${routes.length} keyed routes`);
  });

  it("refuses no key, another sandbox's key and another user, and the owner succeeds on the same route", {
    timeout: scaled(300_000),
  }, async () => {
    const failures: string[] = [];
    const answers: { route: string; text: string }[] = [];
    for (const r of keyedAgentRoutes()) {
      const route = routeKey(r);
      const ids = await freshIds();
      const request = validAgentRequest(route, ids, LLM_BASE_URL) as AgentRequest;
      const path = `${agentPath(ownSandbox, r, ids)}${queryString(request.query)}`;
      const ask = async (who: string, url: string, headers: Record<string, string>) => {
        const res = await fetch(`${agentApi.url}${url}`, agentInit(r.method, request, headers));
        const text = await res.text();
        answers.push({ route: `${route} (${who})`, text });
        return { status: res.status, text };
      };
      const expectStatus = (who: string, got: { status: number; text: string }, want: number) => {
        if (got.status !== want)
          failures.push(`${route}: ${who} got ${got.status}, not ${want}: ${got.text.slice(0, 160)}`);
      };

      expectStatus("no key", await ask("no key", path, {}), 401);
      expectStatus(
        "another sandbox's key",
        await ask("other key", path, { "x-session-api-key": otherSandboxKey }),
        401,
      );
      expectStatus("another user", await ask("stranger", path, { authorization: `Bearer ${stranger.key}` }), 404);
      // The stranger in his own sandbox, naming the owner's ids.
      const batch = r.query.ids !== undefined || r.query.event_ids !== undefined;
      if (r.path_params.length > 0 || batch) {
        const inOwn = await ask(
          "stranger, own sandbox",
          `${agentPath(strangerSandbox, r, ids)}${queryString(request.query)}`,
          { authorization: `Bearer ${stranger.key}` },
        );
        if (r.path_params.length > 0) expectStatus("another user in his sandbox", inOwn, 404);
        else if (inOwn.status !== 200 || !(JSON.parse(inOwn.text) as unknown[]).every((x) => x === null)) {
          failures.push(
            `${route}: another user in his sandbox got ${inOwn.status} ${inOwn.text.slice(0, 160)}, not nulls`,
          );
        }
      }
      // The positive control: the owner, the same route and ids.
      const asOwnerAnswer = await fetch(
        `${agentApi.url}${path}`,
        agentInit(r.method, request, { authorization: `Bearer ${owner.key}` }),
      );
      expectStatus(
        "the owner",
        { status: asOwnerAnswer.status, text: await asOwnerAnswer.text() },
        OWNER_AGENT_STATUS[route] ?? 200,
      );
    }
    for (const a of answers) {
      for (const s of agentSecrets) if (a.text.includes(s)) failures.push(`${a.route} answered with the owner's ${s}`);
    }
    expect(failures).toEqual([]);
  });
});
