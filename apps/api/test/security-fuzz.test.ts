import { scaled } from "@tern/testing";
import fc from "fast-check";
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
 * A property-based fuzz of every operation of the API's own OpenAPI document (a route added later
 * is in it without a change here), on the in-process app with real Postgres and Redis: random path
 * parameters, query strings and JSON bodies never get a 5xx, and every answer that is not a
 * success is JSON with an error body. Seeded and bounded, so a failure replays.
 */

const RUNS_PER_OPERATION = 30;
const SEED = 1123;

let api: TestApi;
let doc: OpenApiDocument;
let key: string;

beforeAll(async () => {
  api = await startTestApi();
  doc = (await (await api.call("/openapi.json")).json()) as OpenApiDocument;
  key = (await api.newUser()).key;
});

afterAll(async () => api?.close());

const POLLUTING_KEYS = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty"];

/** Strings an attacker would try: unicode, control characters, huge, ids of the wrong shape, traversal. */
const nastyString = fc.oneof(
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
  fc.integer({ min: 1_000, max: 300_000 }).map((n) => "\u00e9".repeat(n)),
);

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

describe("the input fuzz, every route of the OpenAPI document", () => {
  const checked: string[] = [];
  const statuses = new Map<number, number>();

  afterAll(() => {
    console.log(
      `input fuzz: ${checked.length} operations, ${RUNS_PER_OPERATION} runs each, seed ${SEED}; statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
  });

  it("answers every random input below 500, with a JSON error body when it refuses", {
    timeout: scaled(600_000),
  }, async () => {
    const ops = operationsOf(doc);
    expect(ops.length).toBeGreaterThanOrEqual(16);
    for (const op of ops) {
      await fc.assert(
        fc.asyncProperty(pathFor(op), queryFor(op), bodyFor(op), authFor, async (path, query, body, auth) => {
          const qs = new URLSearchParams(query).toString();
          const headers = new Headers();
          if (auth === "own") headers.set("authorization", `Bearer ${key}`);
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
          const where = `${op.method} ${url.slice(0, 300)} → ${res.status} ${text.slice(0, 300)}`;
          expect(res.status, where).toBeLessThan(500);
          if (res.status >= 300) {
            expect(res.headers.get("content-type") ?? "", where).toMatch(/^application\/json/);
            const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
            expect(parsed.error?.code, where).toBeTypeOf("string");
            expect(parsed.error?.message, where).toBeTypeOf("string");
          }
        }),
        { numRuns: RUNS_PER_OPERATION, seed: SEED, endOnFailure: true },
      );
      checked.push(`${op.method} ${op.path}`);
    }
    // The runs reached handlers, not only the auth and validation in front of them.
    expect([...statuses.keys()].some((s) => s < 300)).toBe(true);
    expect([...statuses.keys()].some((s) => s === 404)).toBe(true);
    // Nothing a run sent polluted the prototypes this process shares with the app.
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("admin");
  });
});
