import { generateApiKey } from "@tern/core";
import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiKeysRepository, apiKeysRepository } from "../src/repositories/api-keys.ts";
import { usersRepository } from "../src/repositories/users.ts";

let database: TestDatabase;
let keys: ApiKeysRepository;

beforeAll(async () => {
  database = await createTestDatabase();
  keys = apiKeysRepository(database.db);
});

afterAll(async () => {
  await database?.drop();
});

const newKey = async (userId: string, opts: { name?: string; expiresAt?: string | null } = {}) => {
  const generated = generateApiKey();
  const key = await keys.create({
    userId,
    name: opts.name ?? "k",
    prefix: generated.prefix,
    hash: generated.hash,
    expiresAt: opts.expiresAt ?? null,
  });
  return { key, hash: generated.hash };
};

describe("api keys", () => {
  it("finds a live key by its hash, with its user; never an expired or revoked one", async () => {
    const user = await usersRepository(database.db).create({ isAdmin: true });
    const live = await newKey(user.id, { name: "live" });
    expect(live.key).toMatchObject({ userId: user.id, name: "live", revokedAt: null, lastUsedAt: null });
    expect(await keys.findLiveByHash(live.hash)).toEqual({ key: live.key, user });

    const expired = await newKey(user.id, { expiresAt: new Date(Date.now() - 1_000).toISOString() });
    expect(await keys.findLiveByHash(expired.hash)).toBeNull();
    const later = await newKey(user.id, { expiresAt: new Date(Date.now() + 60_000).toISOString() });
    expect((await keys.findLiveByHash(later.hash))?.key.id).toBe(later.key.id);

    expect(await keys.revoke(user.id, live.key.id)).toBe(true);
    expect(await keys.findLiveByHash(live.hash)).toBeNull();
    expect(await keys.findLiveByHash("no such hash")).toBeNull();
  });

  it("lists a user's live keys newest first, and revokes only the owner's own key, once", async () => {
    const users = usersRepository(database.db);
    const owner = await users.create();
    const other = await users.create();
    const a = await newKey(owner.id, { name: "a" });
    const b = await newKey(owner.id, { name: "b" });
    const c = await newKey(owner.id, { name: "c" });
    await newKey(other.id, { name: "other's" });
    expect((await keys.listForUser(owner.id)).map((k) => k.name)).toEqual(["c", "b", "a"]);

    expect(await keys.revoke(other.id, b.key.id)).toBe(false);
    expect(await keys.revoke(owner.id, b.key.id)).toBe(true);
    expect(await keys.revoke(owner.id, b.key.id)).toBe(false);
    expect((await keys.listForUser(owner.id)).map((k) => k.id)).toEqual([c.key.id, a.key.id]);
  });

  it("records last use in one batched write", async () => {
    const user = await usersRepository(database.db).create();
    const a = await newKey(user.id);
    const b = await newKey(user.id);
    await keys.touch([]);
    const at = new Date("2030-01-02T03:04:05.000Z");
    await keys.touch([a.key.id, b.key.id], at);
    const listed = await keys.listForUser(user.id);
    expect(listed.map((k) => k.lastUsedAt)).toEqual(["2030-01-02T03:04:05.000000Z", "2030-01-02T03:04:05.000000Z"]);
  });
});
