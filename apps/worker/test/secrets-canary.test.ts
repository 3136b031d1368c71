import { randomUUID } from "node:crypto";
import { toHexId } from "@tern/core";
import { conversationsRepository, eventsRepository } from "@tern/db";
import { type ScriptedLlmServer, type ServiceProcess, startLlmServer, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, recordingClient, type StartHarness, uuidOf } from "./start-harness.ts";

/**
 * A user's secrets and a start request's, end to end through real API and worker processes: they
 * reach the agent's commands as environment variables, and a canary of each appears nowhere else:
 * not in a response, a log line, an event, the stored request, a queued job or what the LLM is sent.
 */
let h: StartHarness;
let llm: ScriptedLlmServer;
let api: ServiceProcess;
let worker: ServiceProcess;

beforeAll(async () => {
  h = await createStartHarness();
  llm = await startLlmServer();
  api = await h.startApi();
  worker = await h.startWorker(llm.workerEnv("openai"));
});
afterAll(async () => {
  await h?.close();
  await llm?.close();
});

const USER_CANARY = `user-canary-${randomUUID()}`;
const REQUEST_CANARY = `request-canary-${randomUUID()}`;

describe("secrets, end to end", () => {
  it("are the agent's environment and appear nowhere else", async () => {
    const { key } = await h.newUser();
    const { answers, call } = recordingClient(api.url, key);
    expect(
      (
        await call("/api/v1/secrets", {
          method: "POST",
          body: JSON.stringify({ name: "USER_SECRET", value: USER_CANARY }),
        })
      ).status,
    ).toBe(201);

    llm.push(
      { toolCalls: [{ name: "terminal", arguments: { command: 'echo "u=$USER_SECRET r=$REQ_SECRET"' } }] },
      { text: "done" },
    );
    const started = await call("/api/v1/app-conversations", {
      method: "POST",
      body: JSON.stringify({
        initial_message: {
          role: "user",
          content: [{ type: "text", text: `Echo them; r is ${REQUEST_CANARY}.` }],
          run: true,
        },
        secrets: { REQ_SECRET: REQUEST_CANARY },
      }),
    });
    expect(started.status).toBe(200);
    const { task } = await h.waitForTask(started.body.id);
    expect(task.status, task.detail ?? "").toBe("READY");
    const conversationId = task.appConversationId ?? "";
    await waitFor(
      async () => (await conversationsRepository(h.database.db).get(conversationId))?.executionStatus === "finished",
      { what: "the agent run to finish", timeoutMs: 60_000 },
    );

    const events = await eventsRepository(h.database.db).listAll(conversationId);
    const stored = JSON.stringify(events);
    expect(stored).toContain("u=<secret:USER_SECRET> r=<secret:REQ_SECRET>");
    expect(stored).toContain("r is <secret:REQ_SECRET>.");

    await call(`/api/v1/app-conversations?ids=${toHexId(conversationId)}`);
    await call(`/api/v1/app-conversations/start-tasks?ids=${started.body.id}`);
    await call(`/api/v1/conversation/${toHexId(conversationId)}/events/search`);
    const taskRow = await h.database.db
      .selectFrom("start_tasks")
      .select("request")
      .where("id", "=", uuidOf(started.body.id))
      .executeTakeFirstOrThrow();
    const jobs = await Promise.all(
      h.queues.all.map((q) => q.getJobs(["waiting", "delayed", "active", "completed", "failed"])),
    );

    for (const [where, text] of [
      ["events", stored],
      ["responses", answers.join("\n")],
      ["stored request", JSON.stringify(taskRow.request)],
      ["queued jobs", JSON.stringify(jobs.flat().map((j) => j?.data))],
      ["what the LLM was sent", JSON.stringify(llm.requests.map((r) => r.body))],
      ["API log", api.output()],
      ["worker log", worker.output()],
    ] as const) {
      expect(text, where).not.toContain(USER_CANARY);
      expect(text, where).not.toContain(REQUEST_CANARY);
    }
  });
});
