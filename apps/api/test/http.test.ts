import { Validator } from "@seriousme/openapi-schema-validator";
import { eventKinds, toHexId } from "@tern/core";
import { createConversationFixture } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

let api: TestApi;
let key: string;
beforeAll(async () => {
  api = await startTestApi();
  key = (await api.newUser()).key;
});
afterAll(async () => api?.close());

const errorOf = async (res: Response) => {
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const text = await res.text();
  expect(text).not.toMatch(/\n\s+at |node_modules|\.ts:\d+/);
  const body = JSON.parse(text) as { error: { code: string; message: string }; detail: string };
  // FastAPI's `detail` beside our `error`, for clients written for OpenHands.
  expect(body.detail).toBe(body.error.message);
  return body.error;
};

describe("errors are JSON with a stable code", () => {
  it("answers an unknown route with 404", async () => {
    for (const res of [await api.call("/api/v2/nothing", { key }), await api.call("/nothing")]) {
      expect(res.status).toBe(404);
      expect((await errorOf(res)).code).toBe("not_found");
    }
  });

  it("answers a known path asked with the wrong method with 405 and Allow", async () => {
    for (const [method, path, allow] of [
      ["PUT", "/api/keys", "POST"],
      ["DELETE", "/api/v1/app-conversations", "GET"],
      ["POST", "/api/v1/app-conversations/start-tasks", "GET"],
      ["POST", `/api/v1/conversation/${"a".repeat(32)}/events/search`, "GET"],
      ["POST", "/health", "GET"],
    ] as const) {
      const res = await api.call(path, { key, method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get("allow")).toContain(allow);
      expect((await errorOf(res)).code).toBe("method_not_allowed");
    }
  });

  it("answers a NUL character in a query or a JSON string with 422, and writes nothing", async () => {
    // Postgres keeps no NUL in text: before, the search below failed inside its query (500).
    const search = await api.call("/api/v1/app-conversations/count?title__contains=a%00b", { key });
    expect(search.status).toBe(422);
    expect((await errorOf(search)).code).toBe("validation_failed");
    const before = await api.call("/api/keys", { key });
    const created = await api.call("/api/keys", {
      key,
      method: "POST",
      body: '{"name": "a\\u0000b"}',
      headers: { "content-type": "application/json" },
    });
    expect(created.status).toBe(422);
    expect((await errorOf(created)).code).toBe("validation_failed");
    expect(await (await api.call("/api/keys", { key })).json()).toEqual(await before.json());
    // An escaped backslash before "u0000" is text, not a NUL.
    const text = await api.call("/api/keys", {
      key,
      method: "POST",
      body: '{"name": "a\\\\u0000b"}',
      headers: { "content-type": "application/json" },
    });
    expect(text.status).toBe(201);
  });

  it("answers malformed JSON with 400", async () => {
    for (const path of ["/api/keys", "/api/v1/app-conversations"]) {
      const res = await api.call(path, {
        key,
        method: "POST",
        body: '{"title": ',
        headers: { "content-type": "application/json" },
      });
      expect(res.status).toBe(400);
      expect((await errorOf(res)).code).toBe("bad_request");
    }
  });

  it("answers a body that is JSON but not an object with 422", async () => {
    for (const body of [[], "x", 3, null]) {
      const res = await api.call("/api/v1/app-conversations", { key, method: "POST", json: body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect((await errorOf(res)).code).toBe("validation_failed");
    }
  });
});

describe("OpenAPI document and docs", () => {
  it("serves /openapi.json that validates as OpenAPI 3.1", async () => {
    const res = await api.call("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string };
    expect(doc.openapi).toMatch(/^3\.1\./);
    const validator = new Validator();
    const result = await validator.validate(doc as unknown as Parameters<typeof validator.validate>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("lists every endpoint the app serves under /api (the follow-up routes included) and the service ones", async () => {
    const doc = (await (await api.call("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)),
    );
    const served = api.app.routes
      .filter((r) => r.method !== "ALL" && r.path.startsWith("/api/"))
      .map((r) => `${r.method} ${r.path.replace(/:([^/]+)/g, "{$1}")}`);
    expect(served.length).toBeGreaterThanOrEqual(9);
    for (const route of served) expect(documented, route).toContain(route);
    for (const route of [
      "POST /api/keys",
      "GET /api/keys",
      "DELETE /api/keys/{id}",
      "POST /api/v1/app-conversations",
      "GET /api/v1/app-conversations",
      "GET /api/v1/app-conversations/search",
      "GET /api/v1/app-conversations/start-tasks",
      "GET /api/v1/app-conversations/start-tasks/search",
      "GET /api/v1/conversation/{conversation_id}/events/search",
      "GET /api/v1/conversation/{conversation_id}/events/count",
      "GET /health",
      "GET /ready",
    ]) {
      expect(documented, route).toContain(route);
    }
  });

  it("describes each event kind as its own component, one of the events page's items by kind", async () => {
    const doc = (await (await api.call("/openapi.json")).json()) as {
      components: { schemas: Record<string, { oneOf?: unknown[]; discriminator?: unknown; properties?: object }> };
    };
    const schemas = doc.components.schemas;
    expect(JSON.stringify(schemas.EventPage)).toContain("#/components/schemas/Event");
    expect(schemas.Event?.discriminator).toEqual({
      propertyName: "kind",
      mapping: Object.fromEntries(eventKinds.map((k) => [k, `#/components/schemas/${k}`])),
    });
    expect(schemas.Event?.oneOf).toHaveLength(eventKinds.length);
    expect(schemas.ActionEvent?.properties).toHaveProperty("tool_call_id");
    expect(schemas.MessageEvent?.properties).toHaveProperty("llm_message");
  });

  it("serves interactive docs at /docs", async () => {
    const res = await api.call("/docs");
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toMatch(/swagger/i);
    expect(html).toContain("/openapi.json");
    // Served by us, so the page works without internet.
    expect(html).not.toMatch(/https?:\/\//);
    const bundle = await api.call("/docs/assets/swagger-ui-bundle.js");
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get("content-type")).toMatch(/javascript/);
    expect((await api.call("/docs/assets/..%2Fpackage.json")).status).toBe(404);
  });
});

describe("bull-board at /admin/queues", () => {
  it("answers 401 without a key and 403 for a non-admin key", async () => {
    const none = await api.call("/admin/queues");
    expect(none.status).toBe(401);
    expect((await errorOf(none)).code).toBe("unauthorized");
    const user = await api.call("/admin/queues", { key });
    expect(user.status).toBe(403);
    expect((await errorOf(user)).code).toBe("forbidden");
    expect((await api.call(`/admin/queues?token=${key}`)).status).toBe(403);
  });

  it("shows the queues to an admin key, by header or by the cookie that ?token= sets", async () => {
    const admin = await api.newUser({ admin: true });
    const page = await api.call("/admin/queues", { key: admin.key });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/bull/i);

    const login = await fetch(`${api.url}/admin/queues?token=${encodeURIComponent(admin.key)}`, { redirect: "manual" });
    expect(login.status).toBe(302);
    expect(login.headers.get("location")).toBe("/admin/queues");
    const setCookie = login.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Strict/i);
    const cookie = setCookie.split(";")[0] ?? "";

    const withCookie = (path: string) => fetch(`${api.url}${path}`, { headers: { cookie } });
    expect((await withCookie("/admin/queues")).status).toBe(200);
    const queues = await withCookie("/admin/queues/api/queues?activeQueue=&page=1&jobsPerPage=10");
    expect(queues.status).toBe(200);
    const names = ((await queues.json()) as { queues: { name: string }[] }).queues.map((q) => q.name);
    expect(names).toEqual(expect.arrayContaining(api.queues.all.map((q) => q.name)));

    // The cookie carries the key, checked on every request: revoking it ends the session.
    const keys = (await (await api.call("/api/keys", { key: admin.key })).json()) as { id: string }[];
    await api.call(`/api/keys/${keys[0]?.id}`, { key: admin.key, method: "DELETE" });
    expect((await withCookie("/admin/queues/api/queues")).status).toBe(401);
  });
});

describe("internal failures", () => {
  it("answer 500 with a request id and no internals", async () => {
    const owner = await api.newUser();
    const conv = await createConversationFixture(api.database.db, { userId: owner.userId });
    await sql`alter table events rename to events_gone`.execute(api.database.db);
    try {
      const res = await api.call(`/api/v1/conversation/${toHexId(conv.conversationId)}/events/search`, {
        key: owner.key,
      });
      expect(res.status).toBe(500);
      const error = await errorOf(res);
      expect(error.code).toBe("internal");
      expect(error.message).toMatch(/request/);
      expect(error.message).not.toMatch(/events|relation|select/i);
    } finally {
      await sql`alter table events_gone rename to events`.execute(api.database.db);
    }
  });
});

// Last: a refused upload may leave its connection closed under the client.
describe("request size", () => {
  it("answers a body over 1 MiB with 413, declared or streamed", async () => {
    // Just under the limit is fine.
    const fits = JSON.stringify({
      title: "x",
      initial_message: { role: "user", content: [{ type: "text", text: "a".repeat(1_000_000) }] },
    });
    expect(
      (
        await api.call("/api/v1/app-conversations", {
          key,
          method: "POST",
          body: fits,
          headers: { "content-type": "application/json" },
        })
      ).status,
    ).toBe(200);
    const big = JSON.stringify({
      title: "x",
      initial_message: { role: "user", content: [{ type: "text", text: "a".repeat(1_100_000) }] },
    });
    const declared = await api.call("/api/v1/app-conversations", {
      key,
      method: "POST",
      body: big,
      headers: { "content-type": "application/json" },
    });
    expect(declared.status).toBe(413);
    expect((await errorOf(declared)).code).toBe("payload_too_large");
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 11; i++)
          controller.enqueue(new TextEncoder().encode(big.slice(i * 100_000, (i + 1) * 100_000)));
        controller.enqueue(new TextEncoder().encode(big.slice(1_100_000)));
        controller.close();
      },
    });
    const streamed = await api.call("/api/v1/app-conversations", {
      key,
      method: "POST",
      body: stream,
      headers: { "content-type": "application/json" },
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
  });
});
