import { randomUUID } from "node:crypto";
import { type EventDraft, newEvent, type StoredEvent } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { statusChanges } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunDeps, runAgent } from "../src/loop.ts";
import { toolDefinitions } from "../src/tools/definitions.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * Stuck detection: each of OpenHands' five patterns ends its run `stuck`, with an
 * AgentErrorEvent that names the pattern; a failing action is nudged once before.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

const call = (name: string, args: Record<string, unknown> | string) => ({ name, arguments: args });

const runStuck = async (conversationId: string, settings: Partial<AgentRunDeps["settings"]> = {}) => {
  const deps = fx.depsFor("openai", 30);
  const outcome = await runAgent(
    { ...deps, settings: { ...deps.settings, ...settings } },
    conversationId,
    randomUUID(),
  );
  const events = await fx.events(conversationId);
  fx.llm.clear();
  return { outcome, events, error: String(events.findLast((e) => e.kind === "AgentErrorEvent")?.payload.error) };
};

const expectStuck = (r: Awaited<ReturnType<typeof runStuck>>, pattern: string) => {
  expect(r.outcome).toEqual({ outcome: "ended", status: "stuck" });
  expect(statusChanges(r.events)).toEqual(["running", "stuck"]);
  expect(r.error).toContain(`(stuck pattern: ${pattern})`);
};

const messagesFrom = (events: StoredEvent[], source: string) =>
  events.filter((e) => e.kind === "MessageEvent" && e.source === source);

describe("each stuck pattern ends its run, named", () => {
  it("1. the same action with the same result, four times", async () => {
    const { conversationId } = await fx.newConversation({ message: "Check the status." });
    for (let i = 0; i < 4; i++) fx.llm.push({ toolCalls: [call("terminal", { command: "echo unchanged" })] });
    fx.llm.push({ text: "never asked" });
    const r = await runStuck(conversationId);
    expectStuck(r, "repeated_action_observation");
    expect(r.error).toMatch(/same action with the same result/);
  }, 60_000);

  it("2. the same action failing: nudged at the third failure, stuck at the fourth", async () => {
    const { conversationId } = await fx.newConversation({ message: "Run it." });
    // A call the tool refuses (no command): the same arguments, the same error, each time.
    for (let i = 0; i < 4; i++) fx.llm.push({ toolCalls: [call("terminal", "{}")] });
    fx.llm.push({ text: "never asked" });
    const r = await runStuck(conversationId);
    expectStuck(r, "repeated_action_error");
    // One nudge, after the third failure, which the model read before its fourth call.
    const nudges = messagesFrom(r.events, "environment");
    expect(nudges).toHaveLength(1);
    expect(JSON.stringify(nudges[0]?.payload)).toMatch(/3 times in a row and it failed each time/);
    const fourth = fx.llm.requests.at(-1)?.body.messages as { role: string; content: unknown }[];
    expect(JSON.stringify(fourth.at(-1))).toMatch(/3 times in a row/);
  });

  it("2b. a nudged model that changes course is not stuck", async () => {
    const { conversationId } = await fx.newConversation({ message: "Run it." });
    for (let i = 0; i < 3; i++) fx.llm.push({ toolCalls: [call("terminal", "{}")] });
    fx.llm.push({ text: "I cannot run it without a command." });
    const r = await runStuck(conversationId);
    expect(r.outcome).toEqual({ outcome: "ended", status: "finished" });
    expect(messagesFrom(r.events, "environment")).toHaveLength(1);
  });

  it("3. a monologue: responses that only think, six in a row", async () => {
    const { conversationId } = await fx.newConversation({ message: "Plan it." });
    for (let i = 0; i < 6; i++) fx.llm.push({ toolCalls: [call("think", { thought: `Another angle, number ${i}.` })] });
    fx.llm.push({ text: "never asked" });
    const r = await runStuck(conversationId);
    expectStuck(r, "monologue");
    expect(fx.llm.requests.length).toBeGreaterThan(0);
  });

  it("4. two actions taking turns with the same results, six actions", async () => {
    const { conversationId } = await fx.newConversation({ message: "Flip between them." });
    for (let i = 0; i < 6; i++) {
      fx.llm.push({ toolCalls: [call("terminal", { command: i % 2 ? "echo b" : "echo a" })] });
    }
    fx.llm.push({ text: "never asked" });
    const r = await runStuck(conversationId);
    expectStuck(r, "alternating_pattern");
  }, 60_000);

  it("5. a context-error loop: refused as too long, condensed, refused again, three times", async () => {
    const { conversationId } = await fx.newConversation({ message: "Answer." });
    const chatter: EventDraft[] = Array.from({ length: 40 }, (_, i) =>
      i % 2 === 0
        ? newEvent.userMessage([{ type: "text", text: `question ${i}` }])
        : newEvent.agentMessage(`answer ${i}`, { llm_response_id: `old-${i}`, history_seq: i }),
    );
    await eventsRepository(fx.database.db).append(conversationId, chatter);
    await fx.sayToAgent(conversationId, "And now?");
    // Smaller than the tools alone: every step's request is refused; the summaries (no tools) fit.
    fx.llm.setContextLimit(Math.floor(Buffer.byteLength(JSON.stringify(toolDefinitions)) / 4));
    fx.llm.setResponder(() => ({ text: "GOAL: answer. DONE: nothing yet." }));
    try {
      const r = await runStuck(conversationId);
      expectStuck(r, "context_error_loop");
      const condensations = r.events.filter((e) => e.kind === "CondensationEvent");
      expect(condensations.map((c) => (c.payload as { reason?: string }).reason)).toEqual([
        "context_error",
        "context_error",
        "context_error",
      ]);
    } finally {
      fx.llm.setContextLimit(null);
      fx.llm.setResponder(null);
    }
  });
});
