import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxSpecsRepository } from "../src/repositories/sandbox-specs.ts";

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

describe("sandbox specs", () => {
  it("gives the offered images in their order, each with the time it was first offered", async () => {
    const specs = sandboxSpecsRepository(database.db);
    const first = await specs.offered(["img:new", "img:old"]);
    expect(first.map((s) => s.id)).toEqual(["img:new", "img:old"]);
    expect(first[0]?.createdAt).toMatch(/Z$/);
    // Offered again, in another order and with another image: the first times stay.
    const again = await specs.offered(["img:old", "img:other", "img:new"]);
    expect(again.map((s) => s.id)).toEqual(["img:old", "img:other", "img:new"]);
    expect(again.find((s) => s.id === "img:new")).toEqual(first[0]);
    expect(await specs.offered([])).toEqual([]);
  });
});
