import { randomUUID } from "node:crypto";
import { type EventDraft, newEvent } from "@tern/core";
import { eventsRepository } from "@tern/db";
import type { RecordedRequest } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunDeps, runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * What the loop sends and reads of a long conversation (issues 11 and 19): a view condensed to a
 * summary and the recent half, whatever the conversation's length, with the run-state analysis
 * still exact; and the cap on events per conversation, which ends a run with an AgentErrorEvent.
 */
const MAX_VIEW = 20;
const MAX_EVENTS = 700;

let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

const depsWith = (maxIterations = 20, condenserMaxEvents = MAX_VIEW): AgentRunDeps => {
  const deps = fx.depsFor("openai", maxIterations);
  return {
    ...deps,
    settings: {
      ...deps.settings,
      AGENT_CONDENSER_MAX_EVENTS: condenserMaxEvents,
      MAX_EVENTS_PER_CONVERSATION: MAX_EVENTS,
      // The steps below only think: a monologue, which is not what these tests are about.
      AGENT_STUCK_MONOLOGUE: 0,
      // 1 USD a token: a scripted call of 10 + 5 tokens costs 15.
      LLM_PRICES: { "gpt-test": { input: 1_000_000, output: 1_000_000 } },
    },
  };
};

const run = async (conversationId: string, maxIterations?: number, condenserMaxEvents?: number) => {
  await runAgent(depsWith(maxIterations, condenserMaxEvents), conversationId, randomUUID());
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

/** A request without tools is the condenser's summary call. */
const isSummaryCall = (r: RecordedRequest) => !r.body.tools;

describe("the history the model is sent", () => {
  it("is condensed: system prompt, first message, the summary, the recent half", async () => {
    const { conversationId } = await fx.newConversation({ message: "FIRST: build the thing." });
    await eventsRepository(fx.database.db).append(conversationId, chatter(500));
    await fx.sayToAgent(conversationId, "LATEST: what now?");
    const before = fx.llm.requests.length;
    fx.llm.setResponder((r) =>
      isSummaryCall(r) ? { text: "GOAL: build the thing. DONE: talked." } : { text: "Done." },
    );
    try {
      expect((await run(conversationId)).executionStatus).toBe("finished");
    } finally {
      fx.llm.setResponder(null);
    }

    // The summary's call, then the step's.
    const sent = fx.llm.requests.slice(before);
    expect(sent.map(isSummaryCall)).toEqual([true, false]);
    expect(JSON.stringify(sent[0]?.body.messages)).toContain("old question 100");
    const messages = requestMessages(before + 1);
    // system + first user message + summary + the recent half of MAX_VIEW.
    expect(messages.length).toBeLessThanOrEqual(3 + MAX_VIEW / 2);
    expect(messages[0]?.role).toBe("system");
    expect(JSON.stringify(messages[1])).toContain("FIRST: build the thing.");
    expect(JSON.stringify(messages[2])).toMatch(/CONVERSATION_SUMMARY[\s\S]*GOAL: build the thing/);
    expect(JSON.stringify(messages.at(-1))).toContain("LATEST: what now?");
    const text = JSON.stringify(messages);
    expect(text).toContain("old answer 499");
    expect(text).not.toContain("old question 100");
    const events = await fx.events(conversationId);
    const condensations = events.filter((e) => e.kind === "CondensationEvent");
    expect(condensations).toHaveLength(1);
    expect(condensations[0]?.kind === "CondensationEvent" && condensations[0].payload).toMatchObject({
      summary: "GOAL: build the thing. DONE: talked.",
      summary_offset: 2,
      reason: "events",
    });
    // Both calls are in the conversation's metrics, and its cost (what the budget is held to).
    expect((await fx.conversation(conversationId)).metrics).toMatchObject({ llm_calls: 2, accumulated_cost: 30 });
  });

  it("still counts the run's own steps past its condensations (MAX_ITERATIONS holds)", async () => {
    const { conversationId } = await fx.newConversation({ message: "Think a lot." });
    // Each step is two events (ActionEvent, ObservationEvent): the view of 20 is condensed every few steps.
    let step = 0;
    fx.llm.setResponder((r) =>
      isSummaryCall(r)
        ? { text: `summary after step ${step}` }
        : { toolCalls: [{ name: "think", arguments: { thought: `step ${step++}` } }] },
    );
    try {
      expect((await run(conversationId, 25)).executionStatus).toBe("error");
    } finally {
      fx.llm.setResponder(null);
    }
    expect(step).toBe(25);
    const events = await fx.events(conversationId);
    expect(events.filter((e) => e.kind === "CondensationEvent").length).toBeGreaterThan(1);
    expect(JSON.stringify(events.at(-2)?.payload)).toMatch(/maximum iterations limit \(25\)/);
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
    // Without the condenser: this test is about the cap alone.
    expect((await run(conversationId, 20, 0)).executionStatus).toBe("error");
    expect(fx.llm.requests.length - before).toBe(1);
    const events = await fx.events(conversationId);
    const error = events.findLast((e) => e.kind === "AgentErrorEvent");
    expect(JSON.stringify(error?.payload)).toMatch(/limit of 700 events \(MAX_EVENTS_PER_CONVERSATION\)/);
    // Only the closing error and state change go past the cap.
    expect(events.length).toBeLessThanOrEqual(MAX_EVENTS + 2);
    fx.llm.clear();
  });
});
