import { conversationsRepository, sandboxesRepository } from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import { waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { destroySandbox, freezeSandbox, thawSandbox } from "../src/sandbox/commands.ts";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

/**
 * The sandbox commands as the `sandbox` queue's processors run them, against real sandboxes: the
 * row's status always says what the engine did, also when commands race, and a user's pause is
 * theirs to undo while an idle pause (the janitor's) is the next run's.
 */
let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  await fx?.close();
});

const deps = () => ({ db: fx.database.db, sandboxes: fx.sandboxes, queues: fx.queues, logger: fx.logger });

const rowOf = async (conversationId: string) => {
  const sandboxId = (await fx.conversation(conversationId)).sandboxId ?? "";
  const row = await sandboxesRepository(fx.database.db).get(sandboxId);
  if (!row) throw new Error("no sandbox row");
  return row;
};

describe("sandbox commands", () => {
  it("pause and resume: the engine's state and the row's status move together; both are idempotent", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({});
    const { id } = await rowOf(conversationId);
    expect(await freezeSandbox(deps(), id)).toEqual({ outcome: "done", status: "PAUSED" });
    expect((await fx.sandboxes.inspect(sandboxRef))?.state).toBe("paused");
    expect((await rowOf(conversationId)).status).toBe("PAUSED");
    expect((await fx.conversation(conversationId)).sandboxStatus).toBe("PAUSED");
    expect(await freezeSandbox(deps(), id)).toEqual({ outcome: "done", status: "PAUSED" });

    expect(await thawSandbox(deps(), id)).toEqual({ outcome: "done", status: "RUNNING" });
    expect((await fx.sandboxes.inspect(sandboxRef))?.state).toBe("running");
    expect(await thawSandbox(deps(), id)).toEqual({ outcome: "done", status: "RUNNING" });
    expect((await fx.conversation(conversationId)).sandboxStatus).toBe("RUNNING");
  });

  it("commands racing on one sandbox leave the row saying what the engine did", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({});
    const { id } = await rowOf(conversationId);
    const commands = Array.from({ length: 8 }, (_, i) => (i % 2 ? thawSandbox(deps(), id) : freezeSandbox(deps(), id)));
    await Promise.all(commands);
    const state = (await fx.sandboxes.inspect(sandboxRef))?.state;
    const status = (await rowOf(conversationId)).status;
    expect({ state, status }).toEqual(status === "PAUSED" ? { state: "paused", status } : { state: "running", status });
  });

  it("a user's pause of a sandbox the janitor paused for idleness is the user's: the next run waits", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Say hi." });
    const { id } = await rowOf(conversationId);
    // As the janitor leaves an idle sandbox: frozen, PAUSED, and marked as paused for idleness.
    await fx.sandboxes.pause(sandboxRef);
    await sandboxesRepository(fx.database.db).markIdlePaused(id);
    expect(await freezeSandbox(deps(), id)).toEqual({ outcome: "done", status: "PAUSED" });
    expect((await rowOf(conversationId)).idlePausedAt).toBeNull();

    fx.llm.push({ text: "Hi." });
    await fx.useProvider("openai");
    const runId = await enqueueAgentRun(fx.queues, conversationId);
    await waitFor(async () => (await fx.queues.agentRun.getJobState(`run-${conversationId}-${runId}`)) === "delayed", {
      what: "the run to wait for the user's resume",
    });
    expect((await fx.sandboxes.inspect(sandboxRef))?.state).toBe("paused");
    expect(fx.llm.remaining()).toBe(1);

    expect(await thawSandbox(deps(), id)).toEqual({ outcome: "done", status: "RUNNING" });
    const conversation = await fx.waitForRun(conversationId, runId);
    expect(conversation.executionStatus).toBe("finished");
  });

  it("an idle pause alone does not make a run wait: the run resumes the sandbox itself", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Say hi." });
    const { id } = await rowOf(conversationId);
    await fx.sandboxes.pause(sandboxRef);
    await sandboxesRepository(fx.database.db).markIdlePaused(id);
    fx.llm.push({ text: "Hi." });
    const { conversation } = await fx.run(conversationId, "openai");
    expect(conversation.executionStatus).toBe("finished");
    expect((await fx.sandboxes.inspect(sandboxRef))?.state).toBe("running");
    expect((await rowOf(conversationId)).status).toBe("RUNNING");
  });

  it("removal: the sandbox goes, the row is MISSING, and a later pause or resume is refused as gone", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({});
    const { id } = await rowOf(conversationId);
    await freezeSandbox(deps(), id);
    expect(await destroySandbox(deps(), id)).toEqual({ outcome: "done", status: "MISSING" });
    expect(await fx.sandboxes.inspect(sandboxRef)).toBeNull();
    expect(await freezeSandbox(deps(), id)).toEqual({ outcome: "gone" });
    expect(await thawSandbox(deps(), id)).toEqual({ outcome: "gone" });
    expect(await destroySandbox(deps(), id)).toEqual({ outcome: "done", status: "MISSING" });
    expect(await conversationsRepository(fx.database.db).get(conversationId)).toMatchObject({
      sandboxStatus: "MISSING",
    });
    expect(await freezeSandbox(deps(), "00000000-0000-4000-8000-000000000000")).toEqual({ outcome: "missing" });
  });

  it("a sandbox removed behind its back is marked MISSING by the next command", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({});
    const { id } = await rowOf(conversationId);
    await fx.sandboxes.destroy(sandboxRef);
    expect(await freezeSandbox(deps(), id)).toEqual({ outcome: "gone" });
    expect((await rowOf(conversationId)).status).toBe("MISSING");
  });
});
