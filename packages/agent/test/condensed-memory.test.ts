import { randomUUID } from "node:crypto";
import { configFields, type EventDraft, newEvent, type StoredEvent } from "@tern/core";
import { eventsRepository } from "@tern/db";
import type { RecordedRequest, ScriptedReply } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { viewOf } from "../src/condenser/view.ts";
import { buildHistory } from "../src/history.ts";
import type { LlmProvider } from "../src/llm/types.ts";
import { type AgentRunDeps, runAgent } from "../src/loop.ts";
import { toolDefinitions } from "../src/tools/definitions.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * Condensed memory: a long run against an LLM that refuses any request over a small
 * context goes on, condensing as it goes, never sending a request over the limit; the history
 * it sends is rebuilt from the stored events alone, the same each time; and a run whose request
 * is refused as too long condenses and tries again instead of ending.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

/** The worker's default MAX_ITERATIONS (500, as OpenHands'), the limit the long run meets. */
const MAX_ITERATIONS = configFields.MAX_ITERATIONS.parse(undefined);
/** A task of more steps than one run allows: the limit ends the first run, a follow-up finishes it. */
const STEPS = 600;
/** The context the scripted LLM allows, in its tokens (four bytes each): a few times the tools' own size. */
const CONTEXT = 6_000;

const isSummaryCall = (r: RecordedRequest) => !r.body.tools;

const depsWith = (provider: LlmProvider, settings: Partial<AgentRunDeps["settings"]>): AgentRunDeps => {
  const deps = fx.depsFor(provider, MAX_ITERATIONS);
  // The steps below only think: a monologue by our stuck rule, which is not what is tested here.
  return { ...deps, settings: { ...deps.settings, AGENT_STUCK_MONOLOGUE: 0, ...settings } };
};

/** The request the history builder makes of the stored events, from the bounded read as a run does. */
const rebuiltRequest = async (conversationId: string) => {
  const read = await eventsRepository(fx.database.db).readForAgent(conversationId);
  return buildHistory(viewOf([...read.head, ...read.recent]), []);
};

/** A step of the scripted agent: a `think` with a thought of some size, `finish` at the end. */
const scriptedAgent = (steps: number) => {
  let step = 0;
  let summaries = 0;
  const respond = (r: RecordedRequest): ScriptedReply => {
    if (isSummaryCall(r)) {
      summaries++;
      return { text: `GOAL: think ${steps} times. DONE: ${step} thoughts. LEFT: ${steps - step}. FILES: none.` };
    }
    step++;
    if (step > steps) return { toolCalls: [{ name: "finish", arguments: { message: "All thought through." } }] };
    return {
      toolCalls: [{ name: "think", arguments: { thought: `Thought ${step}: ${"the plan holds; ".repeat(12)}` } }],
    };
  };
  return { respond, steps: () => step, summaries: () => summaries };
};

describe("a 600-step run against an LLM with a small context", () => {
  it("reaches step 500 and ends as OpenHands ends it, a follow-up finishes it; condensing several times, never sending a request over the limit", async () => {
    const { conversationId } = await fx.newConversation({ message: "FIRST: think it all through." });
    const agent = scriptedAgent(STEPS);
    const before = fx.llm.requests.length;
    fx.llm.setContextLimit(CONTEXT);
    fx.llm.setResponder(agent.respond);
    try {
      const deps = depsWith("openai", {
        // The operator's table says the model's context; the run condenses before it is reached.
        LLM_CONTEXT_WINDOWS: { "gpt-test": CONTEXT },
      });
      // The first run stops at the default limit, as OpenHands' does: MaxIterationsReached.
      expect(await runAgent(deps, conversationId, randomUUID())).toEqual({ outcome: "ended", status: "error" });
      expect(agent.steps()).toBe(MAX_ITERATIONS);
      const [limit, ...more] = (await fx.events(conversationId)).filter((e) => e.kind === "ConversationErrorEvent");
      expect(more).toEqual([]);
      expect(limit?.payload).toMatchObject({ code: "MaxIterationsReached" });
      expect(String(limit?.payload.detail)).toMatch(/maximum iterations limit \(500\)/);
      // A follow-up goes on from there, in a run with a count of its own, and finishes.
      await fx.sayToAgent(conversationId, "Go on.");
      expect(await runAgent(deps, conversationId, randomUUID())).toEqual({ outcome: "ended", status: "finished" });
    } finally {
      fx.llm.setContextLimit(null);
      fx.llm.setResponder(null);
    }
    const sent = fx.llm.requests.slice(before);
    expect(agent.steps()).toBe(STEPS + 1);
    expect(sent.filter((r) => r.refusedForLength)).toEqual([]);
    expect(Math.max(...sent.map((r) => r.tokens))).toBeLessThanOrEqual(CONTEXT);

    const events = await fx.events(conversationId);
    const condensations = events.filter((e) => e.kind === "CondensationEvent");
    expect(condensations.length).toBeGreaterThanOrEqual(5);
    expect(condensations.length).toBe(agent.summaries());
    // Never re-summarized: each event is forgotten once (a summary is forgotten by the next one).
    const forgotten = condensations.flatMap((c) =>
      c.kind === "CondensationEvent" ? c.payload.forgotten_event_ids : [],
    );
    expect(new Set(forgotten).size).toBe(forgotten.length);
    // The head stays: every step's request starts with the system prompt and the first message.
    for (const r of sent.filter((x) => !isSummaryCall(x))) {
      const messages = r.body.messages as { role: string; content: unknown }[];
      expect(messages[0]?.role).toBe("system");
      expect(JSON.stringify(messages[1])).toContain("FIRST: think it all through.");
    }
    // The summary calls count in the metrics.
    const metrics = (await fx.conversation(conversationId)).metrics as { llm_calls: number };
    expect(metrics.llm_calls).toBe(sent.length);

    // The same history, rebuilt twice from the stored events: the same request.
    const once = await rebuiltRequest(conversationId);
    const twice = await rebuiltRequest(conversationId);
    expect(twice).toEqual(once);
    // And the bounded read gives what the whole history gives, every condensation applied in order.
    expect(buildHistory(viewOf(events), [])).toEqual(once);
    // The last request of the run is the one rebuilt from the events it had seen.
    const lastStep = sent.filter((x) => !isSummaryCall(x)).at(-1);
    const lastAction = events.findLast((x) => x.kind === "ActionEvent");
    const seenSeq = lastAction?.kind === "ActionEvent" ? lastAction.payload.history_seq : 0;
    const rebuilt = buildHistory(viewOf(events.filter((e) => e.seq <= seenSeq)), []);
    const lastMessages = (lastStep?.body.messages ?? []) as unknown[];
    // The wire adds the system prompt as a message of its own.
    expect(lastMessages.length).toBe(rebuilt.messages.length + 1);
    expect(JSON.stringify(lastMessages.at(-1))).toContain(rebuilt.messages.at(-1)?.text ?? "none");
  }, 300_000);
});

/** `n` stored events after the conversation's first ones: user and agent messages in turn. */
const chatter = (n: number): EventDraft[] =>
  Array.from({ length: n }, (_, i) =>
    i % 2 === 0
      ? newEvent.userMessage([{ type: "text", text: `old question ${i}` }])
      : newEvent.agentMessage(`old answer ${i}`, { llm_response_id: `old-${i}`, history_seq: i }),
  );

describe("the provider's context-length error", () => {
  for (const provider of ["openai", "anthropic"] as const) {
    it(`(${provider}) makes the run condense and try again, not end`, async () => {
      const { conversationId } = await fx.newConversation({ message: "FIRST: answer the last question." });
      await eventsRepository(fx.database.db).append(conversationId, chatter(60));
      await fx.sayToAgent(conversationId, `LATEST: ${"long question ".repeat(40)}`);
      // Sized so the whole history does not fit and half of it does; the model is in no table.
      const full = await rebuiltRequest(conversationId);
      const limit = Math.ceil(Buffer.byteLength(JSON.stringify({ ...full, tools: toolDefinitions })) / 4) - 150;
      const before = fx.llm.requests.length;
      fx.llm.setContextLimit(limit);
      fx.llm.setResponder((r) => (isSummaryCall(r) ? { text: "GOAL: answer. DONE: talked." } : { text: "Answered." }));
      try {
        const outcome = await runAgent(depsWith(provider, {}), conversationId, randomUUID());
        expect(outcome).toEqual({ outcome: "ended", status: "finished" });
      } finally {
        fx.llm.setContextLimit(null);
        fx.llm.setResponder(null);
      }
      const sent = fx.llm.requests.slice(before);
      // Refused, condensed (the summary's call), sent again and answered.
      expect(sent.map((r) => (r.refusedForLength ? "refused" : isSummaryCall(r) ? "summary" : "step"))).toEqual([
        "refused",
        "summary",
        "step",
      ]);
      const events: StoredEvent[] = await fx.events(conversationId);
      const condensation = events.find((e) => e.kind === "CondensationEvent");
      expect(condensation?.payload).toMatchObject({ reason: "context_error", summary: "GOAL: answer. DONE: talked." });
      expect(events.filter((e) => e.kind === "AgentErrorEvent")).toEqual([]);
    }, 60_000);
  }
});
