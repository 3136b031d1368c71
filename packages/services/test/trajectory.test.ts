import { eventsSearchRepository } from "@tern/db";
import { createConversationFixture, seedEvents } from "@tern/testing";
import { unzipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trajectoryEntryName, trajectoryZip } from "../src/index.ts";
import { createServiceWorld, type ServiceWorld } from "./world.ts";

let world: ServiceWorld;

beforeAll(async () => {
  world = await createServiceWorld();
});

afterAll(async () => {
  await world?.close();
});

const zipOf = async (chunks: AsyncIterable<Uint8Array>) => {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c);
  return { parts: parts.length, files: unzipSync(Buffer.concat(parts)) };
};

describe("trajectoryZip", () => {
  it("holds meta.json and every event, in order, across several reads of the events", async () => {
    const { conversationId } = await createConversationFixture(world.database.db);
    await seedEvents(world.database.db, conversationId, 1_234);
    const { parts, files } = await zipOf(trajectoryZip(world.deps, conversationId, { id: "meta" }));
    // Produced a page at a time, not in one piece.
    expect(parts).toBeGreaterThan(3);
    expect(JSON.parse(new TextDecoder().decode(files["meta.json"]))).toEqual({ id: "meta" });

    const page = await eventsSearchRepository(world.database.db).page({
      filter: { conversationId },
      order: "asc",
      limit: 2_000,
    });
    const names = Object.keys(files).filter((n) => n !== "meta.json");
    expect(names).toEqual(page.events.map((e, i) => trajectoryEntryName(i, e.id)));
    expect(names).toHaveLength(1_234);
    const last = page.events.at(-1);
    const lastJson = JSON.parse(new TextDecoder().decode(files[names.at(-1) as string]));
    expect(lastJson).toMatchObject({ id: last?.id, kind: last?.kind, timestamp: last?.timestamp });
  });

  it("is meta.json alone for a conversation without events", async () => {
    const { conversationId } = await createConversationFixture(world.database.db);
    const { files } = await zipOf(trajectoryZip(world.deps, conversationId, {}));
    expect(Object.keys(files)).toEqual(["meta.json"]);
    expect(trajectoryEntryName(7, "abc")).toBe("event_000007_abc.json");
  });
});
