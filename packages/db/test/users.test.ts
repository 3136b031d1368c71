import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usersRepository } from "../src/repositories/users.ts";

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

describe("users", () => {
  it("creates users (not admin unless asked), reads them back and counts them", async () => {
    const users = usersRepository(database.db);
    expect(await users.count()).toBe(0);
    const plain = await users.create();
    const admin = await users.create({ isAdmin: true });
    expect(plain.isAdmin).toBe(false);
    expect(admin.isAdmin).toBe(true);
    expect(plain.createdAt).toMatch(/Z$/);
    expect(await users.get(admin.id)).toEqual(admin);
    expect(await users.get("00000000-0000-4000-8000-000000000000")).toBeNull();
    expect(await users.count()).toBe(2);
  });
});
