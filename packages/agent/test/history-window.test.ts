import { randomUUID } from "node:crypto";
import { type EventDraft, newEvent } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunDeps, runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * What the loop reads of a long conversation (issue 11): a bounded window of history, whatever the
 * conversation's length, with the run-state analysis still exact; and the cap on events per
 * conversation, which ends a run with an AgentErrorEvent.
 */
const WINDOW = 20;
const MAX_EVENTS = 700;

let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

const depsWith = (maxIterations = 20): AgentRunDeps => {
  const deps = fx.depsFor("openai", maxIterations);
  return {
    ...deps,
    settings: { ...deps.settings, AGENT_HISTORY_WINDOW: WINDOW, MAX_EVENTS_PER_CONVERSATION: MAX_EVENTS },
  };
};

const run = async (conversationId: string, maxIterations?: number) => {
  await runAgent(depsWith(maxIterations), conversationId, randomUUID());
  return fx.conversation(conversationId);
};

/** `n` stored events after the conversation's first ones: user and agent messages in turn. */
const chatter = (n: number): EventDraft[] =>
  Array.from({ length: n }, (_, i) =>
    i % 2 === 0
      ? newEvent.userMessage([{ type: "text", text: `old question ${i}` }])
      : newEvent.agentMessage(`old answer ${i}`, { llm_response_id: `old-${i}`, history_seq: i }),
  );

const requestMessages = (i: number): { role: string; content: unknown }[] =>
  (fx.llm.requests[i]?.body.messages ?? []) as { role: string; content: unknown }[];

describe("the history the model is sent", () => {
  it("is bounded: system prompt, first message, a marker, the latest events", async () => {
    const { conversationId } = await fx.newConversation({ message: "FIRST: build the thing." });
    await eventsRepository(fx.database.db).append(conversationId, chatter(500));
    await fx.sayToAgent(conversationId, "LATEST: what now?");
    const before = fx.llm.requests.length;
    fx.llm.push({ text: "Done." });
    expect((await run(conversationId)).executionStatus).toBe("finished");

    expect(fx.llm.requests.length - before).toBe(1);
    const messages = requestMessages(before);
    // system + first user message + marker + the window (the run's state change is not a message).
    expect(messages.length).toBeLessThanOrEqual(3 + WINDOW);
    expect(messages[0]?.role).toBe("system");
    expect(JSON.stringify(messages[1])).toContain("FIRST: build the thing.");
    expect(JSON.stringify(messages[2])).toMatch(/\d+ earlier events of this conversation are not shown/);
    expect(JSON.stringify(messages.at(-1))).toContain("LATEST: what now?");
    const text = JSON.stringify(messages);
    expect(text).toContain("old answer 499");
    expect(text).not.toContain("old question 100");
    expect((await fx.events(conversationId)).length).toBeGreaterThan(500);
  });

  it("still counts the run's own steps when they pass the window (MAX_ITERATIONS holds)", async () => {
    const { conversationId } = await fx.newConversation({ message: "Think a lot." });
    // Each step is two events (ActionEvent, ObservationEvent): 15 steps are 30, past the window of 20.
    fx.llm.push(
      ...Array.from({ length: 16 }, (_, i) => ({
        toolCalls: [{ name: "think", arguments: { thought: `step ${i}` } }],
      })),
    );
    expect((await run(conversationId, 15)).executionStatus).toBe("error");
    const events = await fx.events(conversationId);
    expect(JSON.stringify(events.at(-2)?.payload)).toMatch(/maximum of 15 iterations \(LLM calls\)/);
    fx.llm.clear();
  });
});

describe("MAX_EVENTS_PER_CONVERSATION", () => {
  it("ends the run with an AgentErrorEvent once the conversation is full", async () => {
    const { conversationId } = await fx.newConversation({ message: "Go." });
    // 2 first events, 694 more and the follow-up: 697. The run's `running` makes 698, its action
    // 699 and the observation 700: the cap, reached before a second LLM call.
    await eventsRepository(fx.database.db).append(conversationId, chatter(694));
    await fx.sayToAgent(conversationId, "Go on.");
    const before = fx.llm.requests.length;
    fx.llm.push({ toolCalls: [{ name: "terminal", arguments: { command: "echo hi" } }] }, { text: "never sent" });
    expect((await run(conversationId)).executionStatus).toBe("error");
    expect(fx.llm.requests.length - before).toBe(1);
    const events = await fx.events(conversationId);
    const error = events.findLast((e) => e.kind === "AgentErrorEvent");
    expect(JSON.stringify(error?.payload)).toMatch(/limit of 700 events \(MAX_EVENTS_PER_CONVERSATION\)/);
    // Only the closing error and state change go past the cap.
    expect(events.length).toBeLessThanOrEqual(MAX_EVENTS + 2);
    fx.llm.clear();
  });
});
