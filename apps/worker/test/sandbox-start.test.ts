import { toHexId } from "@tern/core";
import { sandboxesRepository, startTasksRepository } from "@tern/db";
import { SandboxLabel } from "@tern/sandbox";
import { type ServiceProcess, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

/**
 * A sandbox without a conversation (POST /api/v1/sandboxes, which OpenHands'
 * `OpenHandsCloudWorkspace` calls first), end to end: the API and real worker processes, real
 * containers. Made STARTING, RUNNING once a worker made it (a warm one when it has one), with its own
 * session key for its agent server and its settings; counted against the quotas; removed by DELETE,
 * by idleness and age; and never leaked by a worker killed while making it.
 */
let h: StartHarness;
let api: ServiceProcess;
const MAX_SANDBOXES = 3;

interface SandboxInfo {
  id: string;
  created_by_user_id: string | null;
  sandbox_spec_id: string;
  status: string;
  session_api_key: string | null;
  exposed_urls: { name: string; url: string; port: number | null }[] | null;
}

beforeAll(async () => {
  h = await createStartHarness();
  api = await h.startApi({ env: { MAX_SANDBOXES_PER_USER: String(MAX_SANDBOXES) } });
});

afterAll(async () => {
  await h?.close();
});

const call = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) =>
  fetch(`${api.url}${path}`, init);
const withKey = (key: string) => ({ authorization: `Bearer ${key}` });

const createSandbox = async (key: string, query = ""): Promise<Response> =>
  call(`/api/v1/sandboxes${query}`, { method: "POST", headers: withKey(key) });

const getSandbox = async (key: string, id: string): Promise<SandboxInfo | null> => {
  const res = await call(`/api/v1/sandboxes?id=${id}`, { headers: withKey(key) });
  expect(res.status).toBe(200);
  return ((await res.json()) as (SandboxInfo | null)[])[0] ?? null;
};

/** What OpenHandsCloudWorkspace does after its POST: poll GET /api/v1/sandboxes?id= until RUNNING. */
const untilRunning = (key: string, id: string) =>
  waitFor(
    async () => {
      const s = await getSandbox(key, id);
      if (s?.status === "ERROR" || s?.status === "MISSING") throw new Error(`sandbox ${id} ended ${s.status}`);
      return s?.status === "RUNNING" && s;
    },
    { what: `sandbox ${id} to run`, timeoutMs: 60_000 },
  );

/** The containers of a sandbox, by the id label every one of them carries (warm ones: by its row's name). */
const containersOf = async (id: string) => {
  const row = await sandboxesRepository(h.database.db).get(uuidOf(id));
  return (await h.sandboxes()).filter(
    (c) => c.labels[SandboxLabel.SandboxId] === uuidOf(id) || (row !== null && c.name === row.name),
  );
};

const started = async (key: string): Promise<SandboxInfo> => {
  const res = await createSandbox(key);
  expect(res.status).toBe(200);
  return (await res.json()) as SandboxInfo;
};

const agent = (id: string, path: string, headers: Record<string, string> = {}) =>
  call(`/agent/${id}${path}`, { headers });
const settings = (id: string, path: string, headers: Record<string, string> = {}) =>
  call(`/api/v1/sandboxes/${id}/settings${path}`, { headers });

describe("POST /api/v1/sandboxes", () => {
  let worker: ServiceProcess;
  let user: { userId: string; key: string };

  beforeAll(async () => {
    // One warm sandbox: the first sandbox started takes it.
    worker = await h.startWorker({ WORKER_ID: "sandboxes", SANDBOX_POOL_SIZE: "1", JANITOR_INTERVAL_MS: "1000" });
    user = await h.newUser();
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it("starts STARTING, runs in the warm sandbox, and exposes its agent server with its own session key", async () => {
    // Warm and ready to claim: running, and the pool's warm-up (the empty workspace) done.
    const warm = await waitFor(
      async () => {
        const c = (await h.sandboxes()).find((s) => s.labels[SandboxLabel.Pool] === "1" && s.state === "running");
        return c && (await h.execIn(c.name, "test -d /workspace/project/.git")).exitCode === 0 && c;
      },
      { what: "a warm sandbox", timeoutMs: 60_000, intervalMs: 100 },
    );
    const info = await started(user.key);
    expect(info).toMatchObject({
      status: "STARTING",
      created_by_user_id: toHexId(user.userId),
      sandbox_spec_id: "tern-sandbox:latest",
      session_api_key: null,
      exposed_urls: null,
    });
    expect(info.id).toMatch(/^[0-9a-f]{32}$/);

    const running = await untilRunning(user.key, info.id);
    expect(running.session_api_key).toMatch(/^sess_/);
    expect(running.exposed_urls).toEqual([
      { name: "AGENT_SERVER", url: expect.stringMatching(new RegExp(`/agent/${info.id}$`)), port: expect.anything() },
    ]);
    // It took the warm sandbox: its row has the warm container's name, and that container is its.
    const row = await sandboxesRepository(h.database.db).get(uuidOf(info.id));
    expect(row?.name).toBe(warm.name);
    expect((await containersOf(info.id)).map((c) => c.name)).toEqual([warm.name]);
    // Its start is no conversation's: the start-task listing does not show it.
    const tasks = await call("/api/v1/app-conversations/start-tasks/search", { headers: withKey(user.key) });
    expect(((await tasks.json()) as { items: unknown[] }).items).toEqual([]);

    // The agent server: health open; the key opens this sandbox's routes (past the key check, an
    // unknown path is 404), no key and a wrong key are 401.
    expect((await agent(info.id, "/alive")).status).toBe(200);
    const key = running.session_api_key as string;
    expect((await agent(info.id, "/api/no-such-route", { "x-session-api-key": key })).status).toBe(404);
    expect((await agent(info.id, "/api/no-such-route")).status).toBe(401);
    expect((await agent(info.id, "/api/no-such-route", { "x-session-api-key": "sess_nope" })).status).toBe(401);

    // It keeps running past the janitor's sweeps (no conversation is no reason to remove it).
    const janitor = await h.watchJanitor();
    await janitor.after(1, 60_000);
    expect((await getSandbox(user.key, info.id))?.status).toBe("RUNNING");
    expect(await containersOf(info.id)).toHaveLength(1);
  });

  it("serves the owner's secrets to its session key only, and DELETE removes its container", async () => {
    const created = await call("/api/v1/secrets", {
      method: "POST",
      headers: { ...withKey(user.key), "content-type": "application/json" },
      body: JSON.stringify({ name: "DEPLOY_TOKEN", value: "s3cr3t-value", description: "for deploys" }),
    });
    expect(created.status).toBeLessThan(300);
    const [a, b] = await Promise.all([started(user.key), started(user.key)]);
    const runningA = await untilRunning(user.key, a.id);
    const runningB = await untilRunning(user.key, b.id);
    const keyA = runningA.session_api_key as string;
    const keyB = runningB.session_api_key as string;
    expect(keyA).not.toBe(keyB);

    const names = await settings(a.id, "/secrets", { "x-session-api-key": keyA });
    expect(names.status).toBe(200);
    expect(await names.json()).toEqual({ secrets: [{ name: "DEPLOY_TOKEN", description: "for deploys" }] });
    const value = await settings(a.id, "/secrets/DEPLOY_TOKEN", { "x-session-api-key": keyA });
    expect(value.status).toBe(200);
    expect(await value.text()).toBe("s3cr3t-value");
    const unknown = await settings(a.id, "/secrets/NOPE", { "x-session-api-key": keyA });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { detail: string }).detail).toBeTruthy();

    // Another sandbox's key (the same owner's), the owner's API key, no key: 401, on the settings and on the agent server.
    const refusedKeys: Record<string, string>[] = [{ "x-session-api-key": keyB }, withKey(user.key), {}];
    for (const headers of refusedKeys) {
      expect((await settings(a.id, "/secrets", headers)).status).toBe(401);
      expect((await settings(a.id, "/secrets/DEPLOY_TOKEN", headers)).status).toBe(401);
    }
    expect((await agent(a.id, "/api/no-such-route", { "x-session-api-key": keyB })).status).toBe(401);
    expect((await agent(b.id, "/api/no-such-route", { "x-session-api-key": keyA })).status).toBe(401);

    // DELETE: the container goes, the record says MISSING, and the key opens nothing more.
    expect(await containersOf(a.id)).toHaveLength(1);
    const del = await call(`/api/v1/sandboxes/${a.id}`, { method: "DELETE", headers: withKey(user.key) });
    expect(del.status).toBe(200);
    expect(await containersOf(a.id)).toEqual([]);
    expect((await getSandbox(user.key, a.id))?.status).toBe("MISSING");
    expect((await settings(a.id, "/secrets", { "x-session-api-key": keyA })).status).toBe(401);
    expect(await containersOf(b.id)).toHaveLength(1);
  });

  it(`counts against MAX_SANDBOXES_PER_USER (${MAX_SANDBOXES}): past it 429, and a removal frees a slot`, async () => {
    const q = await h.newUser();
    const first = await started(q.key);
    await Promise.all([started(q.key), started(q.key)]);
    const refused = await createSandbox(q.key);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("quota_exceeded");
    await untilRunning(q.key, first.id);
    expect((await call(`/api/v1/sandboxes/${first.id}`, { method: "DELETE", headers: withKey(q.key) })).status).toBe(
      200,
    );
    expect((await createSandbox(q.key)).status).toBe(200);
  });

  it("refuses a sandbox_spec_id the workers do not make (422)", async () => {
    const res = await createSandbox(user.key, "?sandbox_spec_id=some-other-image");
    expect(res.status).toBe(422);
  });
});

describe("a sandbox left alone", () => {
  it("is paused for idleness, then removed for age, like a conversation's", async () => {
    const user = await h.newUser();
    const worker = await h.startWorker({
      WORKER_ID: "janitor",
      SANDBOX_POOL_SIZE: "0",
      JANITOR_INTERVAL_MS: "1000",
      SANDBOX_IDLE_PAUSE: "2",
      SANDBOX_MAX_AGE: "8",
    });
    try {
      const info = await started(user.key);
      await untilRunning(user.key, info.id);
      await waitFor(async () => (await getSandbox(user.key, info.id))?.status === "PAUSED", {
        what: "the idle sandbox to be paused",
        timeoutMs: 30_000,
        detail: () => worker.output().slice(-4000),
      });
      expect((await containersOf(info.id))[0]?.state).toBe("paused");
      await waitFor(async () => (await getSandbox(user.key, info.id))?.status === "MISSING", {
        what: "the old sandbox to be removed",
        timeoutMs: 30_000,
      });
      expect(await containersOf(info.id)).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});

describe("a worker killed while it makes the sandbox", () => {
  it("is replaced by another, which makes it RUNNING in one container; none is leaked", async () => {
    const user = await h.newUser();
    const tasks = startTasksRepository(h.database.db);
    const taskOf = async (id: string) => {
      const row = await sandboxesRepository(h.database.db).get(uuidOf(id));
      return row?.startTaskId ? tasks.get(row.startTaskId) : null;
    };
    // The kill must land while the start is in flight (its container made, its task not READY):
    // a worker that finished first proves nothing, so that sandbox is removed and the next tried.
    let info: SandboxInfo | null = null;
    for (let attempt = 0; attempt < 3 && !info; attempt++) {
      // Accepted with no worker alive: the job waits, so the doomed worker is the one that takes it.
      const candidate = await started(user.key);
      // Its janitor's lock, left to lapse one interval after its first sweep began, must not hold
      // the survivor's sweeps off for the default 30 s.
      const doomed = await h.startWorker({
        WORKER_ID: `doomed-${attempt}`,
        SANDBOX_POOL_SIZE: "0",
        JANITOR_INTERVAL_MS: "1000",
      });
      await waitFor(async () => (await containersOf(candidate.id)).length > 0, {
        what: "the doomed worker to make the container",
        timeoutMs: 60_000,
        intervalMs: 5,
      });
      await doomed.kill();
      if ((await taskOf(candidate.id))?.status !== "READY") info = candidate;
      else {
        const cleanup = await h.startWorker({
          WORKER_ID: `cleanup-${attempt}`,
          SANDBOX_POOL_SIZE: "0",
          JANITOR_INTERVAL_MS: "1000",
        });
        await call(`/api/v1/sandboxes/${candidate.id}`, { method: "DELETE", headers: withKey(user.key) });
        await cleanup.stop();
      }
    }
    if (!info) throw new Error("the doomed worker finished the start before every kill; the test proved nothing");
    const id = info.id;
    const survivor = await h.startWorker({
      WORKER_ID: "survivor",
      SANDBOX_POOL_SIZE: "0",
      JANITOR_INTERVAL_MS: "1000",
    });
    try {
      await untilRunning(user.key, id);
      const task = await waitFor(
        async () => {
          const t = await taskOf(id);
          return t?.status === "READY" && t;
        },
        { what: "the sandbox's start to be READY" },
      );
      expect(task.kind).toBe("sandbox");
      expect(task.attempt).toBeGreaterThanOrEqual(2);
      expect(await containersOf(id)).toHaveLength(1);
      // Sweeps after the takeover leave it: one container, running.
      const janitor = await h.watchJanitor();
      await janitor.after(2, 60_000);
      const left = await containersOf(id);
      expect(left).toHaveLength(1);
      expect(left[0]?.state).toBe("running");
      expect((await call(`/api/v1/sandboxes/${id}`, { method: "DELETE", headers: withKey(user.key) })).status).toBe(
        200,
      );
      expect(await containersOf(id)).toEqual([]);
    } finally {
      await survivor.stop();
    }
  });
});

describe("every sandbox made", () => {
  it("is gone once its sandbox was removed: no container of this run outlives its row", async () => {
    const rows = await h.database.db.selectFrom("sandboxes").select(["name", "status"]).execute();
    const live = new Set(rows.filter((r) => r.status !== "MISSING" && r.status !== "ERROR").map((r) => r.name));
    for (const c of await h.sandboxes()) {
      if (c.labels[SandboxLabel.Pool] === "1" && !rows.some((r) => r.name === c.name)) continue;
      expect(live.has(c.name), `${c.name} has no live row`).toBe(true);
    }
  });
});
