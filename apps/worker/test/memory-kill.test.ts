import { enqueueAgentRun } from "@tern/queue";
import { type RecordedRequest, type ScriptedReply, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

/**
 * Condensed memory across a crash: a worker killed in the middle of a long run, after
 * several condensations, is replaced by another that sends the model the very same history, and
 * summarizes nothing again.
 */
let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  await fx?.close();
});

const isSummaryCall = (r: RecordedRequest) => !r.body.tools;

describe("a worker killed during a condensed run", () => {
  it("another worker continues it with the same history, without summarizing again", async () => {
    const { conversationId } = await fx.newConversation({ message: "FIRST: think it through." });
    const HELD = 24;
    const LAST = 30;
    let steps = 0;
    let summaries = 0;
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const agentRequests: RecordedRequest[] = [];
    fx.llm.setResponder((r): ScriptedReply => {
      if (isSummaryCall(r)) {
        summaries++;
        return { text: `GOAL: think ${LAST} times. DONE: ${steps} thoughts.` };
      }
      agentRequests.push(r);
      steps++;
      // The HELD-th call is left in flight: its worker is killed while it waits.
      if (steps === HELD) return { text: "never received", before: () => released };
      if (steps > LAST) return { toolCalls: [{ name: "finish", arguments: { message: "Done." } }] };
      return { toolCalls: [{ name: "think", arguments: { thought: `Thought ${steps}.` } }] };
    });
    const env = {
      ...fx.env("openai", 100),
      AGENT_CONDENSER_MAX_EVENTS: "10",
      AGENT_STUCK_MONOLOGUE: "0",
      SANDBOX_POOL_SIZE: "0",
      WORKER_LOCK_DURATION_MS: "2000",
      WORKER_STALLED_INTERVAL_MS: "1000",
    };
    try {
      const first = await fx.startWorker(env);
      await enqueueAgentRun(fx.queues, conversationId);
      await waitFor(() => steps >= HELD, { what: "the held LLM call", timeoutMs: 60_000 });
      const condensedBefore = (await fx.events(conversationId)).filter((e) => e.kind === "CondensationEvent");
      expect(condensedBefore.length).toBeGreaterThanOrEqual(2);
      const summariesBefore = summaries;
      await first.kill();
      release();

      await fx.startWorker(env);
      const conversation = await waitFor(
        async () => {
          const c = await fx.conversation(conversationId);
          return c.executionStatus !== "running" && c;
        },
        { what: "the run to end", timeoutMs: 60_000 },
      );
      expect(conversation.executionStatus).toBe("finished");

      // The call the killed worker made, made again by the other one: the same history, byte for byte.
      const held = agentRequests[HELD - 1];
      const again = agentRequests[HELD];
      expect(again?.body.messages).toEqual(held?.body.messages);
      // The history after the crash: no condensation was written, and none summarized again, for it.
      const events = await fx.events(conversationId);
      const condensations = events.filter((e) => e.kind === "CondensationEvent");
      expect(condensations.slice(0, condensedBefore.length).map((e) => e.id)).toEqual(condensedBefore.map((e) => e.id));
      expect(summaries).toBe(condensations.length);
      expect(summaries).toBeGreaterThanOrEqual(summariesBefore);
      const forgotten = condensations.flatMap((c) =>
        c.kind === "CondensationEvent" ? c.payload.forgotten_event_ids : [],
      );
      expect(new Set(forgotten).size).toBe(forgotten.length);
    } finally {
      release();
      fx.llm.setResponder(null);
    }
  }, 120_000);
});
