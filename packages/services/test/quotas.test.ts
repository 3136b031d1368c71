import { EventLimitError, PayloadTooLargeError, QuotaExceededError } from "@tern/core";
import { eventsRepository, usersRepository } from "@tern/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, issueApiKey, sendMessage, startConversation, type TenantLimits } from "../src/index.ts";
import { createServiceWorld, type ServiceWorld } from "./world.ts";

let world: ServiceWorld;
beforeAll(async () => {
  world = await createServiceWorld();
});
afterAll(async () => world?.close());

const limits: TenantLimits = {
  maxSandboxesPerUser: 4,
  maxStartsInFlightPerUser: 2,
  maxMessageBytes: 16,
  maxEventsPerConversation: 3,
};
const newUser = async () => (await usersRepository(world.database.db).create()).id;

describe("startConversation's quotas", () => {
  it("refuses the start past MAX_STARTS_IN_FLIGHT_PER_USER, naming the quota", async () => {
    const userId = await newUser();
    const deps = { ...world.deps, limits };
    await startConversation(deps, userId, {});
    await startConversation(deps, userId, {});
    const refused = startConversation(deps, userId, {});
    await expect(refused).rejects.toBeInstanceOf(QuotaExceededError);
    await expect(refused).rejects.toMatchObject({ quota: "MAX_STARTS_IN_FLIGHT_PER_USER", limit: 2 });
  });

  it("lets one of concurrent starts take the last slot, and writes only its task", async () => {
    const userId = await newUser();
    const deps = { ...world.deps, limits };
    await startConversation(deps, userId, {});
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => startConversation(deps, userId, {})));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results.filter((r) => r.status === "rejected")) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(QuotaExceededError);
    }
    const tasks = await world.database.db
      .selectFrom("start_tasks")
      .select("id")
      .where("user_id", "=", userId)
      .execute();
    expect(tasks).toHaveLength(2);
  });

  it("limits nothing without limits (the operator's own tools)", async () => {
    const userId = await newUser();
    for (let i = 0; i < 4; i++) await startConversation(world.deps, userId, {});
  });
});

describe("issueApiKey's quota", () => {
  it("counts live keys, also inside createUserWithKey's transaction", async () => {
    const deps = { db: world.database.db, maxKeyLifetimeDays: 30, maxKeysPerUser: 2 };
    const { userId } = await createUserWithKey(deps, { name: "first" });
    await issueApiKey(deps, userId, { name: "second" });
    await expect(issueApiKey(deps, userId, { name: "third" })).rejects.toMatchObject({
      code: "quota_exceeded",
      quota: "MAX_KEYS_PER_USER",
    });
  });
});

describe("sendMessage's caps", () => {
  it("refuses a message longer than MAX_MESSAGE_BYTES, and one past MAX_EVENTS_PER_CONVERSATION", async () => {
    const { userId, conversationId } = await world.conversationWithSandbox();
    const deps = { ...world.deps, limits };
    const say = (text: string) =>
      sendMessage(deps, { userId }, conversationId, { content: [{ type: "text", text }], run: false });
    await expect(say("x".repeat(17))).rejects.toBeInstanceOf(PayloadTooLargeError);
    for (let i = 0; i < 3; i++) await say(`m${i}`);
    await expect(say("one more")).rejects.toBeInstanceOf(EventLimitError);
    expect(await eventsRepository(world.database.db).listAll(conversationId)).toHaveLength(3);
  });
});
