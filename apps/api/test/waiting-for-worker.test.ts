import { type ApiClient, type ServiceProcess, scaled, startStack, type TestStack, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A start is never silently stranded: the API process (main.ts, as deployed) accepts a start while
// no worker is alive, and its task, /ready, /metrics and the log say it waits for one; a worker
// that arrives takes it to READY.

let stack: TestStack;
let api: ServiceProcess;
let admin: ApiClient;
let user: ApiClient;

interface Task {
  id: string;
  status: string;
  detail: string | null;
}

interface Ready {
  status: string;
  workers: {
    alive: number;
    note?: string;
    engines?: string[];
    list?: { worker_id: string; engine_id: string | null; disk_limit: string | null }[];
  };
}

beforeAll(async () => {
  stack = await startStack({ api: true });
  api = stack.api;
  admin = stack.client((await stack.newUser({ name: "operator", admin: true })).key);
  user = stack.client((await stack.newUser({ name: "user" })).key);
}, scaled(120_000));

afterAll(async () => stack?.close());

describe("a start accepted while no worker is alive", () => {
  it("says on its task, in /ready, /metrics and the log that it waits for a worker, and is taken once one arrives", async () => {
    const before = await admin.json<Ready>(admin.call("/ready"));
    expect(before).toMatchObject({ status: "ok", workers: { alive: 0, engines: [], list: [] } });
    expect(before.workers.note).toMatch(/no worker is alive/);
    // Anyone learns how many; only an admin learns which.
    const anonymous = (await (await fetch(`${api.url}/ready`)).json()) as Ready;
    expect(anonymous.workers).toEqual({ alive: 0, note: before.workers.note });

    const task = await user.json<Task>(user.call("/api/v1/app-conversations", { method: "POST", json: {} }));
    expect(task).toMatchObject({ status: "WORKING", detail: "waiting for a worker" });
    const [stored] = await user.json<Task[]>(user.call(`/api/v1/app-conversations/start-tasks?ids=${task.id}`));
    expect(stored).toMatchObject({ status: "WORKING", detail: "waiting for a worker" });

    // The API looks as soon as it accepts the start (and every 15 s): it counts it, and logs it
    // (then every minute while it waits). Within 10 s, so only the look on acceptance passes.
    await waitFor(() => api.output().includes("wait for a worker, and none is alive"), {
      what: "the API's log line about the waiting start",
      timeoutMs: 10_000,
    });
    const metrics = await (await fetch(`${api.url}/metrics`)).text();
    expect(metrics).toMatch(/^tern_workers_alive 0$/m);
    expect(metrics).toMatch(/^tern_starts_waiting_for_worker 1$/m);

    await stack.startWorker({}, { timeoutMs: 90_000 });
    const ready = await waitFor(
      async () => {
        const [t] = await user.json<Task[]>(user.call(`/api/v1/app-conversations/start-tasks?ids=${task.id}`));
        return t && (t.status === "READY" || t.status === "ERROR") && t;
      },
      { what: "the waiting start to be taken and end", timeoutMs: 120_000 },
    );
    expect(ready).toMatchObject({ status: "READY", detail: null });

    const after = await admin.json<Ready>(admin.call("/ready"));
    expect(after.workers.alive).toBe(1);
    expect(after.workers.note).toBeUndefined();
    expect(after.workers.engines).toHaveLength(1);
    // The test workers opt out of the disk limit (containmentOptOut): the directory says so.
    expect(after.workers.list).toEqual([
      expect.objectContaining({ engine_id: after.workers.engines?.[0], disk_limit: "off" }),
    ]);
  }, 300_000);
});
