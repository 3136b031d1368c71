import { type ServiceProcess, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

// The watched disk limit (main engine: overlay2 over ext4) during a start: a repository whose
// setup script writes 12 GiB fails its start at once, as a repository's fault, naming the limit
// and the size; its sandbox (and what it wrote) is removed.

let h: StartHarness;
let worker: ServiceProcess;

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/fills-disk", {
    ".openhands/setup.sh":
      "#!/bin/bash\nfor i in $(seq 1 12); do dd if=/dev/zero of=fill-$i bs=1M count=1024 status=none || break; done\n",
  });
  worker = await h.startWorker(
    {
      SANDBOX_DISK_ENFORCE: "true",
      SANDBOX_DISK_MB: "1024",
      JANITOR_INTERVAL_MS: "2000",
    },
    { timeoutMs: 120_000 },
  );
}, 240_000);

afterAll(async () => {
  await worker?.kill();
  await h?.close();
});

describe("a start whose setup script fills the disk (watched limit)", () => {
  it("ends in ERROR naming the limit and the size, and its sandbox is removed", async () => {
    const { userId } = await h.newUser();
    const taskId = await h.enqueueDirect(userId, { selected_repository: "acme/fills-disk", git_provider: "github" });
    const { task } = await h.waitForTask(taskId, 180_000);
    expect(task.status).toBe("ERROR");
    expect(task.detail).toMatch(
      /^RUNNING_SETUP_SCRIPT: The sandbox wrote \d+\.\d\d GiB to its disk, past its limit of 1024 MB/,
    );
    await waitFor(async () => (await h.sandboxes()).every((c) => c.labels["tern.task_id"] !== uuidOf(taskId)), {
      what: "the failed start's sandbox to be removed",
      timeoutMs: 120_000,
    });
    console.info(`a setup script filling the disk: ${task.detail}`);
  }, 300_000);
});
