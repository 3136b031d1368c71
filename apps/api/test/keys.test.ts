import { waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => api?.close());

interface CreatedKey {
  id: string;
  name: string | null;
  key: string;
  prefix: string;
  created_at: string;
  expires_at: string | null;
}
interface KeyRecord {
  id: string;
  name: string | null;
  prefix: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
}
const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

describe("POST /api/keys", () => {
  it("returns a new recognisable key once, with its record, and the key authenticates", async () => {
    const { key } = await api.newUser();
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const res = await api.call("/api/keys", { key, method: "POST", json: { name: "ci", expires_at: expires } });
    expect(res.status).toBe(201);
    const body = (await res.json()) as CreatedKey;
    expect(body.key).toMatch(/^oh_[A-Za-z0-9_-]{20,}$/);
    expect(body.key.startsWith(body.prefix)).toBe(true);
    expect(body.id).toMatch(/^[0-9a-f]{32}$/);
    expect(body.name).toBe("ci");
    expect(Date.parse(body.expires_at ?? "")).toBe(Date.parse(expires));
    expect(body.created_at).toMatch(/Z$/);
    expect((await api.call("/api/keys", { key: body.key })).status).toBe(200);
  });

  it("accepts no body at all and an empty object", async () => {
    const { key } = await api.newUser();
    const bare = await api.call("/api/keys", { key, method: "POST" });
    expect(bare.status).toBe(201);
    // No key lives for ever: without expires_at it expires at API_KEY_MAX_LIFETIME_DAYS (365 here).
    const expires = Date.parse(((await bare.json()) as CreatedKey).expires_at ?? "");
    expect(expires).toBeGreaterThan(Date.now() + 364 * 86_400_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 365 * 86_400_000);
    expect((await api.call("/api/keys", { key, method: "POST", json: {} })).status).toBe(201);
  });

  it("refuses an expires_at in the past, unparsable, or beyond the maximum lifetime, naming the field", async () => {
    const { key } = await api.newUser();
    for (const expires_at of [
      new Date(Date.now() - 60_000).toISOString(),
      "next tuesday",
      "2026-02-30T00:00:00Z",
      new Date(Date.now() + 400 * 86_400_000).toISOString(),
      42,
    ]) {
      const res = await api.call("/api/keys", { key, method: "POST", json: { expires_at } });
      expect(res.status, String(expires_at)).toBe(422);
      const error = await errorOf(res);
      expect(error.code).toBe("validation_failed");
      expect(error.message).toMatch(/^expires_at: /);
    }
    const res = await api.call("/api/keys", { key, method: "POST", json: { name: 7 } });
    expect(res.status).toBe(422);
    expect((await errorOf(res)).message).toMatch(/^name: /);
  });
});

describe("GET /api/keys", () => {
  it("lists the caller's keys, newest first, without secrets, and nobody else's", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const made = (await (
      await api.call("/api/keys", { key: alice.key, method: "POST", json: { name: "second" } })
    ).json()) as CreatedKey;
    const res = await api.call("/api/keys", { key: alice.key });
    expect(res.status).toBe(200);
    const list = (await res.json()) as KeyRecord[];
    expect(list.map((k) => k.name)).toEqual(["second", "test"]);
    expect(Object.keys(list[0] ?? {}).sort()).toEqual(
      ["created_at", "expires_at", "id", "last_used_at", "name", "prefix"].sort(),
    );
    expect(JSON.stringify(list)).not.toContain(made.key);
    const bobs = (await (await api.call("/api/keys", { key: bob.key })).json()) as KeyRecord[];
    expect(bobs.map((k) => k.id)).not.toContain(made.id);
    expect(bobs).toHaveLength(1);
  });

  it("keeps last_used_at without a write per request (flushed in batches)", async () => {
    const { key } = await api.newUser();
    const before = (await (await api.call("/api/keys", { key })).json()) as KeyRecord[];
    expect(before[0]?.last_used_at).toBeNull();
    await api.keyUsage.flush();
    const after = (await (await api.call("/api/keys", { key })).json()) as KeyRecord[];
    expect(after[0]?.last_used_at).toMatch(/Z$/);
  });
});

describe("DELETE /api/keys/{id}", () => {
  it("revokes: the key is refused from the next request on, and leaves the list", async () => {
    const { key } = await api.newUser();
    const extra = (await (
      await api.call("/api/keys", { key, method: "POST", json: { name: "x" } })
    ).json()) as CreatedKey;
    expect((await api.call("/api/keys", { key: extra.key })).status).toBe(200);
    const res = await api.call(`/api/keys/${extra.id}`, { key, method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: extra.id, revoked: true });
    const refused = await api.call("/api/keys", { key: extra.key });
    expect(refused.status).toBe(401);
    expect((await errorOf(refused)).code).toBe("unauthorized");
    const list = (await (await api.call("/api/keys", { key })).json()) as KeyRecord[];
    expect(list.map((k) => k.id)).not.toContain(extra.id);
    expect((await api.call(`/api/keys/${extra.id}`, { key, method: "DELETE" })).status).toBe(404);
  });

  it("answers 404 for another user's key (which stays usable), an unknown id and a malformed one", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const bobsKey = (await (await api.call("/api/keys", { key: bob.key, method: "POST" })).json()) as CreatedKey;
    expect((await api.call(`/api/keys/${bobsKey.id}`, { key: alice.key, method: "DELETE" })).status).toBe(404);
    expect((await api.call("/api/keys", { key: bobsKey.key })).status).toBe(200);
    expect((await api.call(`/api/keys/${"0".repeat(32)}`, { key: alice.key, method: "DELETE" })).status).toBe(404);
    expect((await api.call("/api/keys/not-an-id", { key: alice.key, method: "DELETE" })).status).toBe(404);
  });
});

describe("authentication", () => {
  it("takes the key as a Bearer token or as X-Access-Token", async () => {
    const { key } = await api.newUser();
    expect((await api.call("/api/keys", { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await api.call("/api/keys", { headers: { "x-access-token": key } })).status).toBe(200);
  });

  it("answers 401 without a key, with an unknown one, or a malformed Authorization header", async () => {
    const { key } = await api.newUser();
    for (const headers of [
      {} as Record<string, string>,
      { authorization: "Bearer oh_nope" },
      { authorization: `Basic ${key}` },
      { authorization: "Bearer" },
      { "x-access-token": "oh_nope" },
    ]) {
      const res = await api.call("/api/keys", { headers });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect((await errorOf(res)).code).toBe("unauthorized");
    }
  });

  it("stops accepting a key once its expires_at has passed", async () => {
    const { key } = await api.newUser();
    const soon = new Date(Date.now() + 2_000).toISOString();
    const made = (await (
      await api.call("/api/keys", { key, method: "POST", json: { name: "brief", expires_at: soon } })
    ).json()) as CreatedKey;
    expect((await api.call("/api/keys", { key: made.key })).status).toBe(200);
    await waitFor(async () => (await api.call("/api/keys", { key: made.key })).status === 401, {
      what: "the key to expire",
      timeoutMs: 10_000,
      intervalMs: 200,
    });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(soon));
    expect((await api.call("/api/keys", { key })).status).toBe(200);
  });
});
