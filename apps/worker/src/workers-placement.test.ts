import { randomUUID } from "node:crypto";
import { QueueName } from "@tern/queue";
import type { Job } from "bullmq";
import { describe, expect, it } from "vitest";
import { dispatcher, type Placement, type Registry } from "./workers.ts";

const ran: string[] = [];
const registry = {
  "agent.run": async () => {
    ran.push("agent.run");
    return "ran";
  },
} as unknown as Registry;

const placement = (mine: string | null, theirs: string | null) => {
  const forwarded: { name: string; engineId: string }[] = [];
  const p: Placement = {
    engineId: mine,
    engineOf: async () => theirs,
    forward: async (name, _data, engineId) => void forwarded.push({ name, engineId }),
  };
  return { p, forwarded };
};

const runJob = () => {
  const conversationId = randomUUID();
  return { name: "agent.run", data: { conversationId, runId: conversationId } } as Job;
};

describe("affinity in the dispatcher", () => {
  it("forwards a job of a sandbox on another engine to that engine's queue, and does not run it", async () => {
    const { p, forwarded } = placement("engine-a", "engine-b");
    const before = ran.length;
    await expect(dispatcher(QueueName.AgentRun, registry, p)(runJob())).resolves.toEqual({ forwardedTo: "engine-b" });
    expect(forwarded).toEqual([{ name: "agent.run", engineId: "engine-b" }]);
    expect(ran.length).toBe(before);
  });

  it("runs a job of its own engine's sandbox, or of one with no engine recorded", async () => {
    for (const theirs of ["engine-a", null]) {
      const { p, forwarded } = placement("engine-a", theirs);
      await expect(dispatcher(QueueName.AgentRun, registry, p)(runJob())).resolves.toBe("ran");
      expect(forwarded).toEqual([]);
    }
  });
});
