import { createLogger, type EventKind, type StoredEvent, type StoredEventOf } from "@tern/core";
import { agentRunJobId, enqueueAgentRun } from "@tern/queue";
import { statusChanges, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeConversationSandbox } from "../src/sandbox/commands.ts";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

/**
 * The agent-run job (processors/agent-run.ts) around the loop: a run that finds its conversation
 * held waits as a delayed job, a run whose job was lost is ended, and a sandbox removed by the
 * worker ends the run. The loop itself is tested in packages/agent/test.
 */
let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  await fx?.close();
});

const call = (name: string, args: string | Record<string, unknown>) => ({ name, arguments: args });

const of = <K extends EventKind>(events: StoredEvent[], kind: K) =>
  events.filter((e): e is StoredEventOf<K> => e.kind === kind);

const textOf = (m: unknown) => (m as { content: { text: string }[] }).content.map((c) => c.text).join("");

describe("agent-run jobs", () => {
  it("never runs two runs of one conversation at once; a message sent during a call is answered next", async () => {
    const { conversationId } = await fx.newConversation({ message: "First question." });
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let inFlight: () => void = () => undefined;
    const reached = new Promise<void>((r) => {
      inFlight = r;
    });
    fx.llm.push(
      {
        text: "First answer.",
        before: async () => {
          inFlight();
          await held;
        },
      },
      { text: "Second answer." },
    );
    await fx.useProvider("openai");
    const first = await enqueueAgentRun(fx.queues, conversationId);
    await reached;
    await fx.sayToAgent(conversationId, "Second question.");
    const second = await enqueueAgentRun(fx.queues, conversationId);
    // The second job tried, found the conversation held, and was put back (delayed) to try again.
    const state = await waitFor(
      async () => {
        const s = await fx.queues.agentRun.getJobState(agentRunJobId(conversationId, second));
        return s === "delayed" && s;
      },
      { what: "the second run's job to be put back (delayed)", timeoutMs: 10_000, intervalMs: 25 },
    );
    expect(state).toBe("delayed");
    expect(await fx.runs.activeRun(conversationId)).toBe(first);
    release();
    // The first run saw that its answer did not cover the second question and asked the model again.
    const conversation = await fx.waitForRun(conversationId, first);
    expect(conversation.executionStatus).toBe("finished");
    // The second run found nothing left to answer and wrote nothing.
    expect(await fx.waitForJob(conversationId, second)).toBe("completed");
    const events = await fx.events(conversationId);
    expect(statusChanges(events)).toEqual(["running", "finished"]);
    expect(
      events.filter((e) => e.kind === "MessageEvent").map((e) => [e.source, textOf(e.payload.llm_message)]),
    ).toEqual([
      ["user", "First question."],
      ["user", "Second question."],
      ["agent", "First answer."],
      ["agent", "Second answer."],
    ]);
    expect(JSON.stringify(fx.llm.requests.at(-1)?.body)).toContain("Second question.");
  });

  it("ends a run whose job was lost (its lock held by nobody) and answers with the new run", async () => {
    const { conversationId } = await fx.newConversation({ message: "Anyone there?" });
    const lostRun = "00000000-0000-4000-8000-00000000dead";
    await fx.database.db
      .updateTable("conversations")
      .set({ active_run_id: lostRun, execution_status: "running" })
      .where("id", "=", conversationId)
      .execute();
    fx.llm.push({ text: "Yes." });
    const { conversation } = await fx.run(conversationId, "openai");
    expect(conversation.executionStatus).toBe("finished");
    const events = await fx.events(conversationId);
    expect(String(of(events, "AgentErrorEvent")[0]?.payload.error)).toMatch(/job was lost/);
    expect(statusChanges(events)).toEqual(["error", "running", "finished"]);
  });

  it("ends the run in error when the sandbox is removed while the agent works", async () => {
    const { conversationId } = await fx.newConversation({ message: "Work." });
    fx.llm.push({
      toolCalls: [call("terminal", { command: "echo never" })],
      before: async () => {
        await removeConversationSandbox(
          {
            db: fx.database.db,
            sandboxes: fx.sandboxes,
            logger: createLogger("t", "silent"),
          },
          conversationId,
        );
      },
    });
    const { conversation } = await fx.run(conversationId, "openai");
    expect(conversation.executionStatus).toBe("error");
    expect(conversation.sandboxStatus).toBe("MISSING");
    const events = await fx.events(conversationId);
    expect(String(of(events, "AgentErrorEvent")[0]?.payload.error)).toMatch(/sandbox is gone/);
    expect(of(events, "ObservationEvent")).toHaveLength(0);
  });
});
