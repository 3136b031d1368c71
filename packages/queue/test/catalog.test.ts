import { randomUUID } from "node:crypto";
import { createRedisPrefix, deleteRedisPrefix, testRedisUrl } from "@tern/testing";
import { afterAll, describe, expect, it } from "vitest";
import { agentRunJobId, createQueues, createRedis, enqueue, findJob, jobs, QueueName } from "../src/index.ts";

const prefix = createRedisPrefix();
const redis = createRedis(testRedisUrl(), "producer");
const queues = createQueues(redis, prefix);

afterAll(async () => {
  await queues.close();
  redis.disconnect();
  await deleteRedisPrefix(prefix);
});

describe("the job catalog", () => {
  it("names a queue of ours for every job", () => {
    for (const spec of Object.values(jobs)) expect(Object.values(QueueName)).toContain(spec.queue);
  });

  it("adds a job to its queue, under the job's name and fixed id, with the job's options", async () => {
    const taskId = randomUUID();
    await enqueue(queues, "conversation.start", { taskId });
    const job = await findJob(queues, "conversation.start", taskId);
    expect(job?.name).toBe("conversation.start");
    expect(job?.queueName).toBe(QueueName.ConversationStart);
    expect(job?.opts.attempts).toBe(5);
    // The same task twice is one job.
    await enqueue(queues, "conversation.start", { taskId });
    expect(await queues.start.getJobCountByTypes("waiting")).toBe(1);

    const conversationId = randomUUID();
    await enqueue(queues, "agent.run", { conversationId, runId: conversationId });
    expect((await queues.agentRun.getJob(agentRunJobId(conversationId, conversationId)))?.name).toBe("agent.run");
    await enqueue(queues, "sandbox.remove", { conversationId });
    expect((await queues.sandbox.getJobs(["waiting"])).map((j) => j.data)).toEqual([{ conversationId }]);
  });

  it("refuses a payload that does not fit, before anything reaches Redis", async () => {
    await expect(enqueue(queues, "conversation.start", { taskId: "nope" })).rejects.toThrow(/taskId/);
    await expect(
      enqueue(queues, "agent.run", { conversationId: randomUUID() } as { conversationId: string; runId: string }),
    ).rejects.toThrow(/runId/);
    expect(await queues.start.getJobCountByTypes("waiting")).toBe(1);
  });
});
