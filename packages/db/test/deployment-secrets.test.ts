import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deploymentSecretsRepository } from "../src/repositories/deployment-secrets.ts";

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

describe("deployment secrets", () => {
  it("generates a secret once; every later (or concurrent) caller gets that one", async () => {
    const secrets = deploymentSecretsRepository(database.db);
    let n = 0;
    const generate = () => `secret-${++n}`;
    const all = await Promise.all(Array.from({ length: 5 }, () => secrets.getOrCreate("token", generate)));
    expect(new Set(all).size).toBe(1);
    expect(await secrets.getOrCreate("token", () => "another")).toBe(all[0]);
    expect(await secrets.getOrCreate("other", () => "x")).toBe("x");
  });
});
