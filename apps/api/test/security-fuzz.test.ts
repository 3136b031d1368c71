import { randomInt } from "node:crypto";
import { toHexId } from "@tern/core";
import { conversationsRepository } from "@tern/db";
import { createSandboxedConversation, scaled, seedEvents, testSandboxDriver } from "@tern/testing";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ContractRoute, routeKey } from "./agent-server-contract.ts";
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
 * A property-based fuzz of every operation of the API's own OpenAPI document (a route added later
 * is in it without a change here), on the in-process app with real Postgres and Redis: random path
 * parameters, query strings and JSON bodies never get a 5xx, and every answer that is not a
 * success is JSON with an error body. Each run draws a new seed (TERN_FUZZ_SEED sets it), printed
 * and named by a failure, so CI explores new inputs every time and any failure replays.
 *
 * Its positive control: every operation is also asked once with a valid request (its own key,
 * well-formed ids, a valid body), which must reach its handler, past authentication and validation.
 * A fuzz of an operation that only ever answered "invalid" would prove nothing about the handler.
 */

/** Per operation and CI run (every run draws new inputs); TERN_FUZZ_RUNS for a longer search. */
const RUNS_PER_OPERATION = Number(process.env.TERN_FUZZ_RUNS ?? 15);
const SEED = process.env.TERN_FUZZ_SEED ? Number(process.env.TERN_FUZZ_SEED) : randomInt(2 ** 31);
const replay = `seed ${SEED} (replay with TERN_FUZZ_SEED=${SEED})`;
console.log(`input fuzz: ${replay}`);

let api: TestApi;
let doc: OpenApiDocument;
let key: string;
let adminKey: string;

beforeAll(async () => {
  api = await startTestApi();
  doc = (await (await api.call("/openapi.json")).json()) as OpenApiDocument;
  key = (await api.newUser()).key;
  adminKey = (await api.newUser({ admin: true })).key;
});

afterAll(async () => api?.close());

const POLLUTING_KEYS = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty"];

/**
 * Huge strings, up to the API's longest field limits (300k characters). They are the costly draw
 * (a query of six pairs can run to megabytes, most of the fuzz's time when one string in seven
 * was huge), so they are one string in twenty: still dozens in every operation's runs.
 */
const hugeString = fc.integer({ min: 1_000, max: 300_000 }).map((n) => "\u00e9".repeat(n));

/** Strings an attacker would try: unicode, control characters, ids of the wrong shape, traversal, huge. */
const ordinaryNastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)) }),
  fc.stringMatching(/^[0-9a-f]{32}$/),
  fc.uuid(),
  fc.constantFrom(
    "",
    " ",
    "null",
    "undefined",
    "-1",
    "1e309",
    "NaN",
    "../../etc/passwd",
    "%00",
    "\u0000",
    "\ud800",
    "'; DROP TABLE users; --",
    "$" + "{jndi:ldap://x}",
    ...POLLUTING_KEYS,
  ),
);

const nastyString = fc.oneof({ arbitrary: hugeString, weight: 1 }, { arbitrary: ordinaryNastyString, weight: 19 });

/** Any JSON, with polluting keys and huge strings among the object keys and leaves. */
const junk: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    nastyString,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 5 }),
    tie("object"),
  ),
  object: fc
    .array(fc.tuple(fc.oneof(nastyString, fc.constantFrom(...POLLUTING_KEYS)), tie("value")), { maxLength: 6 })
    .map((entries) => {
      // Own properties, as JSON.parse makes them, even for "__proto__".
      const o: Record<string, unknown> = {};
      for (const [k, v] of entries)
        Object.defineProperty(o, k, { value: v, enumerable: true, configurable: true, writable: true });
      return o;
    }),
})).value;

/** A valid body with one field replaced by junk, or junk at a polluting key: reaches deeper than pure junk. */
const nearlyValid = (op: Operation): fc.Arbitrary<unknown> => {
  const base = op.body ? sampleOf(doc, op.body) : {};
  const keys = base && typeof base === "object" && !Array.isArray(base) ? Object.keys(base) : [];
  return fc.tuple(fc.constantFrom(...keys, ...POLLUTING_KEYS), junk).map(([k, v]) => {
    const o = { ...(base as Record<string, unknown>) };
    Object.defineProperty(o, k, { value: v, enumerable: true, configurable: true, writable: true });
    return o;
  });
};

type Body = { kind: "json"; value: unknown } | { kind: "raw"; text: string } | { kind: "none" };

const bodyFor = (op: Operation): fc.Arbitrary<Body> =>
  fc.oneof(
    // The operation's valid body now and then, so the runs reach its handler, not only its validation.
    fc.constant<Body>(validBodyOf(op) === undefined ? { kind: "none" } : { kind: "json", value: validBodyOf(op) }),
    junk.map((value): Body => ({ kind: "json", value })),
    nearlyValid(op).map((value): Body => ({ kind: "json", value })),
    fc
      .constantFrom("{", "[1,", '{"a":', "\u0000", "not json", '{"__proto__":{"admin":true}}')
      .map((text): Body => ({ kind: "raw", text })),
    fc.constant<Body>({ kind: "none" }),
  );

/** Known parameter names and random ones, each with one value or several. */
const queryFor = (op: Operation): fc.Arbitrary<[string, string][]> => {
  const names = op.parameters.filter((p) => p.in === "query").map((p) => p.name);
  const name = fc.oneof(fc.constantFrom(...names, ...POLLUTING_KEYS), nastyString);
  return fc.array(fc.tuple(name, nastyString), { maxLength: 6 });
};

const pathFor = (op: Operation): fc.Arbitrary<Record<string, string>> => {
  const names = op.parameters.filter((p) => p.in === "path").map((p) => p.name);
  return fc
    .tuple(...names.map(() => nastyString))
    .map((values) => Object.fromEntries(names.map((n, i) => [n, values[i] ?? ""])));
};

const authFor = fc.oneof(
  { weight: 6, arbitrary: fc.constant<"own" | "none" | string>("own") },
  { weight: 1, arbitrary: fc.constant<"own" | "none" | string>("none") },
  { weight: 1, arbitrary: nastyString.filter((s) => /^[\x21-\x7e]*$/.test(s)) },
);

/** Codes a request gets before its handler runs: authentication, validation, routing. */
const NOT_REACHED = new Set([
  "unauthorized",
  "forbidden",
  "bad_request",
  "validation_failed",
  "method_not_allowed",
  "payload_too_large",
]);

/** Whether the answer came from the operation's handler, not from what stands in front of it. */
const reachedHandler = (status: number, text: string): boolean => {
  if (status < 400) return true;
  const error = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
  return !NOT_REACHED.has(error?.code ?? "") && error?.message !== "No such route";
};

/**
 * Bodies that pass the refinements a schema's sample does not know of (a public https URL, a
 * provider's own shape); every other operation is asked with `sampleOf` its schema.
 */
const VALID_BODIES: Record<string, unknown> = {
  "POST /api/v1/webhooks": { url: "https://93.184.216.34/hook", events: ["conversation.event"] },
  "POST /api/v1/git/providers": { provider: "github", token: "fuzz-token" },
};

/** A body that passes the operation's validation: VALID_BODIES', else a sample of its schema. */
const validBodyOf = (op: Operation): unknown => {
  const route = `${op.method} ${op.path}`;
  return route in VALID_BODIES ? VALID_BODIES[route] : op.body ? sampleOf(doc, op.body) : undefined;
};

/**
 * Operations only a sandbox's own session key may call, never an API key: no key of the
 * fuzz opens them, and apps/worker/test/sandbox-start.test.ts reaches them with a live sandbox's.
 */
const SANDBOX_KEY_ONLY = new Set([
  "GET /api/v1/sandboxes/{id}/settings/secrets",
  "GET /api/v1/sandboxes/{id}/settings/secrets/{name}",
]);

/** Operations only an admin key may call: asked with one. */
const ADMIN_ONLY = new Set(["POST /api/v1/users", "POST /api/v1/sandbox-specs", "DELETE /api/v1/sandbox-specs"]);

/** A well-formed id that names nothing: the handler answers it (404), the validator lets it through. */
const absentId = () =>
  randomInt(2 ** 31)
    .toString(16)
    .padStart(32, "0");

/** The ids (absent ones), the required query parameters and the body of a request that passes validation. */
const validRequestOf = (op: Operation) => {
  const path: Record<string, string> = {};
  const query: [string, string][] = [];
  for (const p of op.parameters) {
    const value = /(^|_)id$/.test(p.name) ? absentId() : String(sampleOf(doc, p.schema ?? {}));
    if (p.in === "path") path[p.name] = value;
    else if (p.in === "query" && p.required) query.push([p.name, value]);
  }
  const body = validBodyOf(op);
  return {
    path,
    query,
    body: body === undefined ? ({ kind: "none" } as Body) : ({ kind: "json", value: body } as Body),
  };
};

describe("the input fuzz, every route of the OpenAPI document", () => {
  it("reaches the handler of every operation with a valid request (the fuzz's positive control)", async () => {
    const ops = operationsOf(doc);
    const unreached: string[] = [];
    for (const op of ops) {
      const route = `${op.method} ${op.path}`;
      if (SANDBOX_KEY_ONLY.has(route)) continue;
      const { path, query: pairs } = validRequestOf(op);
      const query = new URLSearchParams(pairs);
      const body = validBodyOf(op);
      const res = await api.call(`${fillPath(op.path, path)}${query.size > 0 ? `?${query}` : ""}`, {
        key: ADMIN_ONLY.has(route) ? adminKey : key,
        method: op.method,
        ...(body !== undefined ? { json: body } : {}),
      });
      const text = await answerText(op, res);
      if (!reachedHandler(res.status, text)) unreached.push(`${route} → ${res.status} ${text.slice(0, 200)}`);
    }
    expect(unreached).toEqual([]);
  });

  const checked: string[] = [];
  const statuses = new Map<number, number>();
  const reached = new Map<string, number>();

  afterAll(() => {
    console.log(
      `input fuzz: ${checked.length} operations, ${RUNS_PER_OPERATION} runs each, ${replay}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; runs that reached a handler, per operation: ${JSON.stringify(Object.fromEntries(reached))}`,
    );
  });

  it("answers every random input below 500, with a JSON error body when it refuses", {
    timeout: scaled(600_000),
  }, async () => {
    const ops = operationsOf(doc);
    expect(ops.length).toBeGreaterThanOrEqual(16);
    for (const op of ops) {
      const example = validRequestOf(op);
      const asserted = fc.assert(
        fc.asyncProperty(pathFor(op), queryFor(op), bodyFor(op), authFor, async (path, query, body, auth) => {
          const qs = new URLSearchParams(query).toString();
          const headers = new Headers();
          const own = ADMIN_ONLY.has(`${op.method} ${op.path}`) ? adminKey : key;
          if (auth === "own") headers.set("authorization", `Bearer ${own}`);
          else if (auth !== "none") headers.set("authorization", `Bearer ${auth}`);
          let payload: string | undefined;
          if (body.kind !== "none" && op.method !== "GET") {
            headers.set("content-type", "application/json");
            payload = body.kind === "json" ? JSON.stringify(body.value) : body.text;
          }
          const url = `http://api.test${fillPath(op.path, path)}${qs ? `?${qs}` : ""}`;
          const res = await api.app.request(url, { method: op.method, headers, body: payload });
          const text = await answerText(op, res);
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const route = `${op.method} ${op.path}`;
          if (reachedHandler(res.status, text)) reached.set(route, (reached.get(route) ?? 0) + 1);
          const where = `${op.method} ${url.slice(0, 300)} → ${res.status} ${text.slice(0, 300)}`;
          expect(res.status, where).toBeLessThan(500);
          if (res.status >= 300) {
            expect(res.headers.get("content-type") ?? "", where).toMatch(/^application\/json/);
            const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
            expect(parsed.error?.code, where).toBeTypeOf("string");
            expect(parsed.error?.message, where).toBeTypeOf("string");
          }
        }),
        {
          numRuns: RUNS_PER_OPERATION,
          seed: SEED,
          endOnFailure: true,
          // A valid request first, so that every seed reaches each handler at least once.
          examples: [[example.path, example.query, example.body, "own"]],
        },
      );
      // fast-check names its own seed and path; this names how to replay the whole file.
      await asserted.catch((err: unknown) => {
        throw new Error(`input fuzz of ${op.method} ${op.path} failed, ${replay}: ${String(err)}`, { cause: err });
      });
      checked.push(`${op.method} ${op.path}`);
    }
    // The fuzz's count of its own reach: every operation a key of the fuzz opens was reached by some run.
    expect(
      ops.map((op) => `${op.method} ${op.path}`).filter((r) => !SANDBOX_KEY_ONLY.has(r) && !reached.get(r)),
      "operations no run reached",
    ).toEqual([]);
    // Nothing a run sent polluted the prototypes this process shares with the app.
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("admin");
  });
});

/**
 * The same fuzz over the agent-server mount: every keyed route of the committed contract that tern
 * serves (agent-server-operations.ts), on a real sandbox and worker. Each run draws the route's
 * ids, query and body from the owner's valid request or from the nasty values above; no answer is
 * a 5xx, and every refusal is the agent server's JSON `{"detail": ...}`. Its positive control: the
 * owner's valid request reaches every route's handler, and the runs that reached one are counted
 * per route (every route must have some).
 */
describe("the input fuzz, every keyed route of the agent-server contract", () => {
  let agentApi: TestApi;
  let owner: { key: string; userId: string };
  let sandboxId: string;
  let ids: AgentIds;
  const LLM_BASE_URL = "http://127.0.0.1:9/v1";

  beforeAll(async () => {
    const llmUrls = { LLM_USER_BASE_URLS: "http://127.0.0.1:9" };
    agentApi = await startTestApi({ worker: true, env: llmUrls, workerEnv: llmUrls });
    owner = await agentApi.newUser();
    const { conversationId } = await createSandboxedConversation({
      db: agentApi.database.db,
      sandboxes: testSandboxDriver(),
      namespace: agentApi.prefix,
      userId: owner.userId,
      tools: [],
    });
    sandboxId = (await conversationsRepository(agentApi.database.db).get(conversationId))?.sandboxId ?? "";
    await seedEvents(agentApi.database.db, conversationId, 3);
    const base = `${agentApi.url}/agent/${toHexId(sandboxId)}`;
    const auth = { authorization: `Bearer ${owner.key}` };
    const events = await fetch(`${base}/api/conversations/${toHexId(conversationId)}/events/search`, { headers: auth });
    const command = await fetch(`${base}/api/bash/start_bash_command`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ command: "true" }),
    });
    ids = {
      conversation_id: toHexId(conversationId),
      event_id: ((await events.json()) as { items: { id: string }[] }).items[0]?.id ?? "",
      bash_event_id: ((await command.json()) as { id: string }).id,
    };
  }, scaled(180_000));

  afterAll(async () => agentApi?.close());

  /** Codes a request gets before its route's handler: the key, validation, routing, the body's size. */
  const refusedBefore = (r: ContractRoute, status: number, detail: unknown) =>
    [400, 401, 405, 413, 422].includes(status) ||
    // An unknown path; a route with ids answers an unknown one "Not Found" too, from its handler.
    (status === 404 && detail === "Not Found" && r.path_params.length === 0);

  const send = (path: string, init: RequestInit) => agentApi.app.request(`http://api.test${path}`, init);

  it("reaches the handler of every keyed route with the owner's valid request (the fuzz's positive control)", {
    timeout: scaled(120_000),
  }, async () => {
    const unreached: string[] = [];
    for (const r of keyedAgentRoutes()) {
      const request = validAgentRequest(routeKey(r), ids, LLM_BASE_URL) as AgentRequest;
      const res = await send(
        `${agentPath(sandboxId, r, ids)}${queryString(request.query)}`,
        agentInit(r.method, request, { authorization: `Bearer ${owner.key}` }),
      );
      const text = await res.text();
      const detail = res.status >= 400 ? (JSON.parse(text) as { detail?: unknown }).detail : undefined;
      if (refusedBefore(r, res.status, detail)) unreached.push(`${routeKey(r)} → ${res.status} ${text.slice(0, 200)}`);
    }
    expect(unreached).toEqual([]);
  });

  it("answers every random input below 500, with the agent server's {detail} when it refuses", {
    timeout: scaled(600_000),
  }, async () => {
    const reached = new Map<string, number>();
    const statuses = new Map<number, number>();
    for (const r of keyedAgentRoutes()) {
      const route = routeKey(r);
      const valid = validAgentRequest(route, ids, LLM_BASE_URL) as AgentRequest;
      const idArb = (name: keyof AgentIds) => fc.oneof(fc.constant(ids[name]), nastyString);
      const names = [...Object.keys(r.query), ...POLLUTING_KEYS];
      const validQuery = Object.entries(valid.query ?? {}).flatMap(([k, v]) =>
        [v].flat().map((x): [string, string] => [k, x]),
      );
      const query = fc.oneof(
        fc.constant(validQuery),
        fc.array(fc.tuple(fc.oneof(fc.constantFrom(...names), nastyString), nastyString), { maxLength: 6 }),
      );
      const body = fc.oneof(
        fc.constant<Body | { kind: "valid" }>({ kind: "valid" }),
        junk.map((value): Body => ({ kind: "json", value })),
        fc
          .constantFrom("{", '{"a":', "\u0000", "not json", '{"__proto__":{"admin":true}}')
          .map((text): Body => ({ kind: "raw", text })),
      );
      const asserted = fc.assert(
        fc.asyncProperty(
          idArb("conversation_id"),
          idArb("event_id"),
          idArb("bash_event_id"),
          query,
          body,
          authFor,
          async (conversation_id, event_id, bash_event_id, q, b, auth) => {
            const key: Record<string, string> =
              auth === "own"
                ? { authorization: `Bearer ${owner.key}` }
                : auth === "none"
                  ? {}
                  : { "x-session-api-key": auth };
            const raw = b.kind === "json" ? JSON.stringify(b.value) : b.kind === "raw" ? b.text : undefined;
            const init: RequestInit =
              b.kind === "valid"
                ? agentInit(r.method, valid, key)
                : raw !== undefined && r.method !== "GET"
                  ? { method: r.method, headers: { ...key, "content-type": "application/json" }, body: raw }
                  : { method: r.method, headers: key };
            const qs = new URLSearchParams(q).toString();
            const path = `${agentPath(sandboxId, r, { conversation_id, event_id, bash_event_id })}${qs ? `?${qs}` : ""}`;
            const res = await send(path, init);
            const text = await res.text();
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
            const where = `${route}: ${r.method} ${path.slice(0, 300)} → ${res.status} ${text.slice(0, 300)}`;
            expect(res.status, where).toBeLessThan(500);
            let detail: unknown;
            if (res.status >= 300) {
              expect(res.headers.get("content-type") ?? "", where).toMatch(/^application\/json/);
              detail = (JSON.parse(text) as { detail?: unknown }).detail;
              expect(detail, where).toBeDefined();
            }
            if (!refusedBefore(r, res.status, detail)) reached.set(route, (reached.get(route) ?? 0) + 1);
          },
        ),
        {
          numRuns: RUNS_PER_OPERATION,
          seed: SEED,
          endOnFailure: true,
          // The owner's valid request first, so that every seed reaches each handler at least once.
          examples: [[ids.conversation_id, ids.event_id, ids.bash_event_id, validQuery, { kind: "valid" }, "own"]],
        },
      );
      await asserted.catch((err: unknown) => {
        throw new Error(`input fuzz of ${route} failed, ${replay}: ${String(err)}`, { cause: err });
      });
    }
    console.log(
      `agent-server input fuzz: ${keyedAgentRoutes().length} routes, ${RUNS_PER_OPERATION} runs each, ${replay}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; runs that reached a handler, per route: ${JSON.stringify(Object.fromEntries(reached))}`,
    );
    expect(
      keyedAgentRoutes()
        .map(routeKey)
        .filter((route) => !reached.get(route)),
      "routes no run reached",
    ).toEqual([]);
  });
});
