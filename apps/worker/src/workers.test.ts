import { randomUUID } from "node:crypto";
import { QueueName } from "@tern/queue";
import { type Job, UnrecoverableError } from "bullmq";
import { describe, expect, it } from "vitest";
import { dispatcher, type Registry } from "./workers.ts";

const seen: { name: string; data: unknown }[] = [];
const record =
  (name: string) =>
  async (job: Job): Promise<string> => {
    seen.push({ name, data: job.data });
    return name;
  };
const registry = {
  "conversation.start": record("conversation.start"),
  "agent.run": record("agent.run"),
  "sandbox.remove": record("sandbox.remove"),
  "janitor.sweep": record("janitor.sweep"),
} as unknown as Registry;

const job = (name: string, data: unknown) => ({ name, data }) as Job;

describe("the worker's dispatcher", () => {
  it("hands a job whose payload fits its schema to the job's processor", async () => {
    const conversationId = randomUUID();
    const run = dispatcher(QueueName.AgentRun, registry);
    await expect(run(job("agent.run", { conversationId, runId: conversationId }))).resolves.toBe("agent.run");
    // A job added before the catalog was keyed by job still finds its processor.
    await expect(run(job("run", { conversationId, runId: conversationId }))).resolves.toBe("agent.run");
  });

  it("fails at once (no retry) a payload that does not fit, naming the field", async () => {
    const start = dispatcher(QueueName.ConversationStart, registry);
    const before = seen.length;
    const err = await start(job("conversation.start", { taskId: "not-a-uuid" })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect((err as Error).message).toMatch(/taskId/);
    expect(seen.length).toBe(before);
  });

  it("fails at once a job that does not belong on the queue", async () => {
    const sandbox = dispatcher(QueueName.Sandbox, registry);
    const err = await sandbox(job("agent.run", { conversationId: randomUUID(), runId: randomUUID() })).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UnrecoverableError);
  });
});
