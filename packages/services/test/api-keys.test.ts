import { hashApiKey, NotFoundError, ValidationError } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, issueApiKey, type KeyDeps, listApiKeys, revokeApiKey } from "../src/index.ts";

let database: TestDatabase;
let deps: KeyDeps;

beforeAll(async () => {
  database = await createTestDatabase();
  deps = { db: database.db, maxKeyLifetimeDays: 30 };
});
afterAll(async () => database?.drop());

const daysAhead = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
const userCount = async () =>
  Number(
    (
      await database.db
        .selectFrom("users")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .executeTakeFirstOrThrow()
    ).n,
  );

describe("issueApiKey", () => {
  it("issues a key that authenticates, storing only its hash, with the expiry asked for", async () => {
    const { userId } = await createUserWithKey(deps, { name: "first" });
    const expires = daysAhead(10);
    const issued = await issueApiKey(deps, userId, { name: "ci", expiresAt: expires });
    expect(issued.key).toMatch(/^oh_/);
    expect(issued.key.startsWith(issued.apiKey.prefix)).toBe(true);
    expect(Date.parse(issued.apiKey.expiresAt ?? "")).toBe(Date.parse(expires));
    const found = await apiKeysRepository(database.db).findLiveByHash(hashApiKey(issued.key));
    expect(found?.key.id).toBe(issued.apiKey.id);
    expect(JSON.stringify(await database.db.selectFrom("api_keys").selectAll().execute())).not.toContain(issued.key);
  });

  it("refuses an expires_at past the lifetime cap and writes nothing", async () => {
    const { userId } = await createUserWithKey(deps);
    const before = await listApiKeys(deps, userId);
    const refused = issueApiKey(deps, userId, { name: "too long", expiresAt: daysAhead(31) });
    await expect(refused).rejects.toBeInstanceOf(ValidationError);
    await expect(refused).rejects.toThrow("expires_at: at most 30 days ahead");
    expect(await listApiKeys(deps, userId)).toEqual(before);
  });
});

describe("createUserWithKey", () => {
  it("makes the user and the key together, or neither when the key is refused", async () => {
    const users = await userCount();
    await expect(createUserWithKey(deps, { expiresAt: daysAhead(365) })).rejects.toBeInstanceOf(ValidationError);
    expect(await userCount()).toBe(users);
    const made = await createUserWithKey(deps, { admin: true, name: "ops" });
    expect(await userCount()).toBe(users + 1);
    const found = await apiKeysRepository(database.db).findLiveByHash(hashApiKey(made.key));
    expect(found?.user).toMatchObject({ id: made.userId, isAdmin: true });
    expect(found?.key.name).toBe("ops");
  });
});

describe("revokeApiKey", () => {
  it("revokes the user's own key once; another user's, an unknown or a malformed id is NotFoundError", async () => {
    const alice = await createUserWithKey(deps);
    const bob = await createUserWithKey(deps);
    await expect(revokeApiKey(deps, alice.userId, bob.apiKey.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(revokeApiKey(deps, alice.userId, "not-an-id")).rejects.toThrow("No such API key");
    expect(await listApiKeys(deps, bob.userId)).toHaveLength(1);
    expect(await revokeApiKey(deps, bob.userId, bob.apiKey.id.replaceAll("-", ""))).toBe(bob.apiKey.id);
    expect(await listApiKeys(deps, bob.userId)).toEqual([]);
    await expect(revokeApiKey(deps, bob.userId, bob.apiKey.id)).rejects.toBeInstanceOf(NotFoundError);
  });
});
