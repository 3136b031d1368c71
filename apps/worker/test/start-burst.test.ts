import type { ServiceProcess } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

let h: StartHarness;
let api: ServiceProcess;

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/burst", {
    ".openhands/setup.sh": "#!/bin/bash\nsleep 0.3\ntouch .ready\n",
    "AGENTS.md": "Keep it short.\n",
  });
  [api] = await Promise.all([
    h.startApi(),
    h.startWorker({ WORKER_ID: "burst-1", WORKER_CONCURRENCY: "4" }),
    h.startWorker({ WORKER_ID: "burst-2", WORKER_CONCURRENCY: "4" }),
  ]);
});

afterAll(async () => {
  await h?.close();
  expect(await h.sandboxes()).toEqual([]);
});

describe("two worker processes", () => {
  it("share a burst of 20 starts: all READY, each in its own sandbox, both workers took part", async () => {
    const { key } = await h.newUser();
    const ids = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const res = await h.post(api, key, {
          title: `burst ${i}`,
          selected_repository: i % 2 === 0 ? "acme/burst" : null,
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    const results = await Promise.all(ids.map((id) => h.waitForTask(id, 120_000)));
    expect(results.map((r) => [r.task.status, r.task.detail])).toEqual(ids.map(() => ["READY", null]));

    const taskIds = results.map((r) => r.task.id);
    const containers = await h.sandboxes();
    expect(containers.map((c) => c.labels["tern.task_id"]).sort()).toEqual([...taskIds].sort());
    const conversations = await h.database.db.selectFrom("conversations").select("start_task_id").execute();
    expect(conversations.map((c) => c.start_task_id).sort()).toEqual([...taskIds].sort());

    // Each worker ran some of the jobs to their end (the job says which); together exactly the 20.
    const jobs = await Promise.all(taskIds.map((id) => h.queues.start.getJob(id)));
    const finishedBy = ["burst-1", "burst-2"].map((name) =>
      jobs.filter((j) => j?.processedBy === name).map((j) => j?.data.taskId),
    );
    expect(finishedBy[0]!.length).toBeGreaterThan(0);
    expect(finishedBy[1]!.length).toBeGreaterThan(0);
    expect([...finishedBy[0]!, ...finishedBy[1]!].sort()).toEqual([...taskIds].sort());
  });
});
