import { enqueueAgentRun } from "@tern/queue";
import { waitFor, fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  await fx?.close();
});

const GRACE_MS = 2_000;

describe("a worker stopped (SIGTERM) while its run waits on a long command", () => {
  it("exits within WORKER_SHUTDOWN_GRACE_MS, and another worker finishes the run without running the command again", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Wait for it." });
    fx.llm.push(
      // `timeout` makes the call wait the whole 20 s, far past the grace.
      {
        toolCalls: [
          { name: "terminal", arguments: { command: "echo began >> marks.txt; sleep 20; echo ended", timeout: 120 } },
        ],
      },
      { text: "Waited." },
    );
    const env = {
      ...fx.env("openai"),
      SANDBOX_POOL_SIZE: "0",
      WORKER_SHUTDOWN_GRACE_MS: String(GRACE_MS),
      WORKER_LOCK_DURATION_MS: "2000",
      WORKER_STALLED_INTERVAL_MS: "1000",
    };
    const first = await fx.startWorker(env);
    await enqueueAgentRun(fx.queues, conversationId);
    await waitFor(
      async () => (await fx.exec(sandboxRef, `cat ${workspaceDir}/marks.txt 2>/dev/null`)).includes("began"),
      { what: "the command to start", timeoutMs: 60_000 },
    );

    const stopping = Date.now();
    await first.stop();
    const took = Date.now() - stopping;
    // The grace, then the hand-back and the closing of its connections: seconds, not the command's 20.
    expect(took).toBeLessThan(GRACE_MS + 6_000);

    const second = await fx.startWorker(env);
    const conversation = await waitFor(
      async () => {
        const c = await fx.conversation(conversationId);
        return c.executionStatus !== "running" && c;
      },
      { what: "the run to end", timeoutMs: 90_000, detail: () => second.output().slice(-3000) },
    );
    expect(conversation.executionStatus).toBe("finished");
    expect(await fx.exec(sandboxRef, `cat ${workspaceDir}/marks.txt`)).toBe("began\n");
    const observation = (await fx.events(conversationId)).find((e) => e.kind === "ObservationEvent");
    expect(observation?.payload.observation).toMatchObject({ exit_code: 0, status: "completed" });
    expect(JSON.stringify(observation?.payload.observation)).toContain("ended");
  }, 180_000);
});
