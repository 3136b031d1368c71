import { textOfContent } from "@tern/core";
import { enqueueAgentRun } from "@tern/queue";
import { kindsOf, statusChanges, waitFor, fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  await fx?.close();
});

describe("a worker killed during a run", () => {
  it("another worker finishes the run in the same live shell, and the command that was running is executed once", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Mark the file." });
    fx.llm.push(
      { toolCalls: [{ name: "terminal", arguments: { command: "export BEFORE=kept-across-workers" } }] },
      {
        toolCalls: [
          {
            name: "terminal",
            arguments: { command: "echo started >> marks.txt; sleep 4; echo done >> marks.txt; echo marked" },
          },
        ],
      },
      { toolCalls: [{ name: "terminal", arguments: { command: 'echo "$BEFORE"' } }] },
      { text: "Marked." },
    );
    const env = {
      ...fx.env("openai"),
      LOG_LEVEL: "info",
      SANDBOX_POOL_SIZE: "0",
      // Short locks, so the killed worker's job is seen as stalled within seconds.
      WORKER_LOCK_DURATION_MS: "2000",
      WORKER_STALLED_INTERVAL_MS: "1000",
    };
    const first = await fx.startWorker(env);
    const runId = await enqueueAgentRun(fx.queues, conversationId);

    // The command is running in the sandbox: its ActionEvent is stored, its first line written.
    await waitFor(
      async () => (await fx.exec(sandboxRef, `cat ${workspaceDir}/marks.txt 2>/dev/null`)).includes("started"),
      { what: "the command to start" },
    );
    const before = await fx.events(conversationId);
    expect(kindsOf(before).at(-1)).toBe("ActionEvent");
    await first.kill();

    const second = await fx.startWorker(env);
    const conversation = await waitFor(
      async () => {
        const c = await fx.conversation(conversationId);
        return c.executionStatus !== "running" && c;
      },
      { what: "the run to end", timeoutMs: 45_000 },
    );
    expect(conversation.executionStatus).toBe("finished");

    // Executed once: one "started" and one "done", though two workers handled the call.
    expect(await fx.exec(sandboxRef, `cat ${workspaceDir}/marks.txt`)).toBe("started\ndone\n");
    const events = await fx.events(conversationId);
    expect(kindsOf(events)).toEqual([
      "SystemPromptEvent",
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "ActionEvent",
      "ObservationEvent",
      "ActionEvent",
      "ObservationEvent",
      "MessageEvent",
    ]);
    expect(statusChanges(events)).toEqual(["running", "finished"]);
    const observations = events.filter((e) => e.kind === "ObservationEvent").map((e) => e.payload.observation);
    expect(observations[1]).toMatchObject({ exit_code: 0, status: "completed" });
    expect(textOfContent(observations[1]?.content ?? [])).toMatch(/^marked\n/);
    // The shell outlived the worker that started it: what the first command exported is still there.
    expect(textOfContent(observations[2]?.content ?? [])).toMatch(/^kept-across-workers\n/);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));

    const run = await fx.database.db
      .selectFrom("agent_runs")
      .selectAll()
      .where("id", "=", runId)
      .executeTakeFirstOrThrow();
    expect(run.attempts).toBe(2);
    expect(run.status).toBe("finished");
    expect(second.output()).toMatch(/"outcome":"resumed"/);
    // The model was asked four times in all: the killed worker's call was not made again.
    expect(fx.llm.requests).toHaveLength(4);
  });
});
