import { gitProviderSealContext, gitProvidersRepository } from "@tern/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => api?.close());

interface ProviderRecord {
  id: string;
  provider: string;
  host: string | null;
  created_at: string;
  updated_at: string;
}
const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;
const canary = "ghp_canary_0123456789abcdef";

describe("/api/v1/git/providers", () => {
  it("keeps a token sealed, shows the account without it, replaces it per provider, and deletes it", async () => {
    const { key, userId } = await api.newUser();
    const created = await api.call("/api/v1/git/providers", {
      key,
      method: "POST",
      json: { provider: "github", token: canary },
    });
    expect(created.status).toBe(201);
    const text = await created.text();
    expect(text).not.toContain(canary);
    const record = JSON.parse(text) as ProviderRecord;
    expect(record).toMatchObject({ provider: "github", host: null });
    expect(record.id).toMatch(/^[0-9a-f]{32}$/);

    // Sealed at rest, bound to this user and provider.
    const stored = await gitProvidersRepository(api.database.db).findForUser(userId, "github");
    expect(stored?.tokenSealed).not.toContain(canary);
    expect(api.secretBox.open(stored!.tokenSealed, gitProviderSealContext(userId, "github"))).toBe(canary);
    expect(() => api.secretBox.open(stored!.tokenSealed, gitProviderSealContext(userId, "gitlab"))).toThrow();

    const gitlab = await api.call("/api/v1/git/providers", {
      key,
      method: "POST",
      json: { provider: "gitlab", token: `${canary}-gl`, host: "gitlab.example.com" },
    });
    expect(gitlab.status).toBe(201);
    // A second github token replaces the first.
    const again = await api.call("/api/v1/git/providers", {
      key,
      method: "POST",
      json: { provider: "github", token: `${canary}-2`, host: "https://github.example.com" },
    });
    expect(again.status).toBe(201);

    const list = await api.call("/api/v1/git/providers", { key });
    expect(list.status).toBe(200);
    const listText = await list.text();
    expect(listText).not.toContain(canary);
    const accounts = JSON.parse(listText) as ProviderRecord[];
    expect(accounts.map((a) => [a.provider, a.host])).toEqual([
      ["github", "https://github.example.com"],
      ["gitlab", "gitlab.example.com"],
    ]);

    const del = await api.call(`/api/v1/git/providers/${accounts[1]!.id}`, { key, method: "DELETE" });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ id: accounts[1]!.id, deleted: true });
    const after = (await (await api.call("/api/v1/git/providers", { key })).json()) as ProviderRecord[];
    expect(after.map((a) => a.provider)).toEqual(["github"]);
    expect((await api.call(`/api/v1/git/providers/${accounts[1]!.id}`, { key, method: "DELETE" })).status).toBe(404);
  });

  it("another user's account is 404 and absent from their list", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const res = await api.call("/api/v1/git/providers", {
      key: alice.key,
      method: "POST",
      json: { provider: "bitbucket", token: canary },
    });
    const { id } = (await res.json()) as ProviderRecord;
    const del = await api.call(`/api/v1/git/providers/${id}`, { key: bob.key, method: "DELETE" });
    expect(del.status).toBe(404);
    expect((await errorOf(del)).code).toBe("not_found");
    expect(await (await api.call("/api/v1/git/providers", { key: bob.key })).json()).toEqual([]);
    expect((await api.call("/api/v1/git/providers/not-an-id", { key: bob.key, method: "DELETE" })).status).toBe(404);
    // Still Alice's.
    const hers = (await (await api.call("/api/v1/git/providers", { key: alice.key })).json()) as ProviderRecord[];
    expect(hers.map((a) => a.id)).toEqual([id]);
  });

  it("refuses bad input with 422 naming the field, never echoing the token", async () => {
    const { key } = await api.newUser();
    const cases: [unknown, string][] = [
      [{ provider: "sourceforge", token: canary }, "provider"],
      [{ provider: "github" }, "token"],
      [{ provider: "github", token: "" }, "token"],
      [{ provider: "gitlab", token: canary, host: "gitlab.example.com/path?x=1" }, "host"],
      [{ provider: "gitlab", token: canary, host: "ftp://gitlab.example.com" }, "host"],
      [{ provider: "github", token: "x".repeat(5000) }, "token"],
    ];
    for (const [json, field] of cases) {
      const res = await api.call("/api/v1/git/providers", { key, method: "POST", json });
      expect(res.status, JSON.stringify(json).slice(0, 80)).toBe(422);
      const text = await res.text();
      expect(text).not.toContain(canary);
      expect(JSON.parse(text).error.message).toMatch(new RegExp(`^${field}`));
    }
    expect((await api.call("/api/v1/git/providers", { method: "GET" })).status).toBe(401);
  });
});
