import { randomBytes } from "node:crypto";
import { parseId, toHexId } from "@tern/core";
import { conversationsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { liveWorkers } from "@tern/queue";
import {
  type ApiClient,
  type GitServer,
  type ScriptedLlmServer,
  scaled,
  testSandboxDriver,
  waitFor,
} from "@tern/testing";
import { unzipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * Sandboxes, sandbox specs, and what a conversation holds (its files, skills, hooks, trajectory),
 * end to end: the API in this process, a real worker process (its internal HTTP server is how the
 * API reads a sandbox), real sandboxes, a git server and the scripted LLM.
 */
let api: TestApi;
let llm: ScriptedLlmServer;
let git: GitServer;
let driver: ReturnType<typeof testSandboxDriver>;
let client: ApiClient;
let key: string;
let userId: string;
let otherKey: string;
const OLD_IMAGE = "tern-sandbox:previous";

const REPO_FILES: Record<string, string> = {
  "README.md": "# widgets\nThe readme.\n",
  "docs/guide.md": "A guide.\n",
  ".openhands/pre-commit.sh": "#!/bin/bash\nexit 0\n",
  ".openhands/skills/testing.md": "---\nname: testing\ntriggers: [test, pytest]\n---\nRun the tests with make test.\n",
  "AGENTS.md": "Always be brief.\n",
};

beforeAll(async () => {
  api = await startTestApi({
    env: { SANDBOX_IMAGES: ` ${OLD_IMAGE} , tern-sandbox:latest ` },
    worker: true,
    git: true,
    llm: true,
  });
  llm = api.stack.llm;
  git = api.stack.git;
  driver = testSandboxDriver();
  await git.createFixtureRepo("acme/widgets", REPO_FILES);
  ({ key, userId } = await api.newUser());
  ({ key: otherKey } = await api.newUser());
  client = api.client(key);
}, scaled(120_000));

afterAll(async () => api?.close());

interface Conversation {
  id: string;
  sandbox_id: string;
  sandbox_status: string;
  execution_status: string;
  session_api_key: string;
}

interface SandboxInfo {
  id: string;
  created_by_user_id: string | null;
  sandbox_spec_id: string;
  status: string;
  session_api_key: string | null;
  exposed_urls: unknown[] | null;
  created_at: string;
}

interface EventItem {
  id: string;
  kind: string;
  key?: string;
  value?: unknown;
  [k: string]: unknown;
}

/** Starts a conversation through the API and follows its task to READY; returns the conversation and task ids. */
const start = async (body: Record<string, unknown>, who = key): Promise<{ id: string; taskId: string }> => {
  const { id, task } = await client.as(who).start(body);
  return { id, taskId: task.id };
};

const conversation = (id: string, who = key) => client.as(who).conversation<Conversation>(id);

const sandboxes = async (ids: string[], who = key) =>
  client.json<(SandboxInfo | null)[]>(
    await api.call(`/api/v1/sandboxes?${ids.map((i) => `id=${i}`).join("&")}`, { key: who }),
  );

const allEvents = (id: string) => client.events<EventItem>(id);

/** The driver's reference of a sandbox (tests look at it with the driver; the API never does). */
const refOf = async (sandboxHex: string): Promise<string> => {
  const row = await sandboxesRepository(api.database.db).get(parseId(sandboxHex) ?? "");
  if (!row?.ref) throw new Error("sandbox has no ref");
  return row.ref;
};

const readFile = (id: string, path: string, who = key) =>
  api.call(`/api/v1/app-conversations/${id}/file?file_path=${encodeURIComponent(path)}`, { key: who });

const waitForExecution = (id: string, statuses: string[]) => client.waitForExecution<Conversation>(id, statuses);

/** The state of a run's job, on the queue of the engine that holds its conversation's sandbox. */
const runJobState = async (conversationId: string, runId: string) => {
  const c = await conversationsRepository(api.database.db).get(parseId(conversationId) ?? "");
  const s = c?.sandboxId ? await sandboxesRepository(api.database.db).get(c.sandboxId) : null;
  return api.queues
    .forEngine(s?.engineId ?? null)
    .agentRun.getJobState(`run-${parseId(conversationId)}-${parseId(runId)}`);
};

describe("a conversation started from a repository", () => {
  let conv: { id: string; taskId: string };

  beforeAll(async () => {
    conv = await start({ selected_repository: "acme/widgets" });
  }, scaled(120_000));

  it("lists the skills the repository brought, in OpenHands' shape", async () => {
    const body = await client.json<{ skills: { name: string; type: string; content: string; triggers: string[] }[] }>(
      await api.call(`/api/v1/app-conversations/${conv.id}/skills`, { key }),
    );
    const byName = new Map(body.skills.map((s) => [s.name, s]));
    expect(byName.get("testing")).toEqual({
      name: "testing",
      type: "knowledge",
      content: expect.stringContaining("make test"),
      triggers: ["test", "pytest"],
    });
    expect([...byName.values()].some((s) => s.type === "repo" && s.content.includes("Always be brief"))).toBe(true);
  });

  it("lists the git hook SETTING_UP_GIT_HOOKS installed", async () => {
    const body = await client.json<{ hooks: unknown[] }>(
      await api.call(`/api/v1/app-conversations/${conv.id}/hooks`, { key }),
    );
    expect(body).toEqual({
      hooks: [
        {
          event_type: "pre-commit",
          matchers: [
            {
              matcher: "*",
              hooks: [{ type: "command", command: ".openhands/pre-commit.sh", timeout: null, async: false }],
            },
          ],
        },
      ],
    });
    const empty = await start({});
    expect(await client.json(await api.call(`/api/v1/app-conversations/${empty.id}/hooks`, { key }))).toEqual({
      hooks: [],
    });
    expect(await client.json(await api.call(`/api/v1/app-conversations/${empty.id}/skills`, { key }))).toEqual({
      skills: [],
    });
  });

  it("reads a file of the workspace through a worker, by relative or absolute path and through inner symlinks", async () => {
    const ref = await refOf((await conversation(conv.id)).sandbox_id);
    const made = await driver.exec(ref, {
      cmd: [
        "bash",
        "-c",
        "cd /workspace/widgets && ln -s README.md readme-link && ln -s /etc/passwd passwd-link && ln -s /etc etc-link && ln -s ../.. up-link && mkdir -p sub",
      ],
    });
    expect(made.exitCode).toBe(0);
    expect(await client.json(await readFile(conv.id, "README.md"))).toBe(REPO_FILES["README.md"]);
    expect(await client.json(await readFile(conv.id, "/workspace/widgets/docs/guide.md"))).toBe("A guide.\n");
    expect(await client.json(await readFile(conv.id, "sub/../docs/guide.md"))).toBe("A guide.\n");
    expect(await client.json(await readFile(conv.id, "readme-link"))).toBe(REPO_FILES["README.md"]);
    // As OpenHands answers: what names no regular file reads as "".
    expect(await client.json(await readFile(conv.id, "no-such-file.md"))).toBe("");
    expect(await client.json(await readFile(conv.id, "sub"))).toBe("");
  });

  it("refuses with 403 a path that leaves the workspace, directly or through a symlink", async () => {
    for (const path of [
      "/etc/passwd",
      "../../etc/passwd",
      "/workspace/../etc/hostname",
      "passwd-link",
      "etc-link/hostname",
      "up-link/etc/passwd",
      "no-such-dir/../../../etc/passwd",
      "/proc/self/environ",
    ]) {
      const res = await readFile(conv.id, path);
      expect(res.status, path).toBe(403);
      const body = await client.json<{ error: { code: string }; detail: string }>(res, 403);
      expect(body.error.code).toBe("forbidden");
      expect(body.detail).toMatch(/outside the workspace/);
    }
  });

  it("answers 404 for another user's conversation or a start task's id, and 422 for a bad file_path", async () => {
    expect((await readFile(conv.id, "README.md", otherKey)).status).toBe(404);
    expect((await readFile(conv.taskId, "README.md")).status).toBe(404);
    const empty = await client.json<{ error: { message: string } }>(
      await api.call(`/api/v1/app-conversations/${conv.id}/file?file_path=`, { key }),
      422,
    );
    expect(empty.error.message).toMatch(/^file_path/);
    for (const route of ["skills", "hooks", "download"]) {
      expect((await api.call(`/api/v1/app-conversations/${conv.id}/${route}`, { key: otherKey })).status).toBe(404);
    }
  });

  it("downloads the trajectory as a zip: meta.json and every event, in order, as the events search gives them", async () => {
    const res = await api.call(`/api/v1/app-conversations/${conv.id}/download`, { key });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/zip");
    expect(res.headers.get("content-disposition")).toContain(`conversation-${conv.id}.zip`);
    const files = unzipSync(new Uint8Array(await res.arrayBuffer()));
    const text = (name: string) => new TextDecoder().decode(files[name]);
    const meta = JSON.parse(text("meta.json")) as { id: string };
    expect(meta.id).toBe(conv.id);
    const events = await allEvents(conv.id);
    expect(events.length).toBeGreaterThan(0);
    const names = Object.keys(files).filter((n) => n !== "meta.json");
    expect(names).toEqual(events.map((e, i) => `event_${String(i).padStart(6, "0")}_${e.id}.json`));
    events.forEach((e, i) => {
      expect(JSON.parse(text(names[i] as string))).toEqual(e);
    });
  });

  it("answers a download of a start task's id with 404", async () => {
    const res = await api.call(`/api/v1/app-conversations/${conv.taskId}/download`, { key });
    expect(res.status).toBe(404);
    expect((await client.json<{ error: { code: string } }>(res, 404)).error.code).toBe("not_found");
  });
});

describe("sandboxes", () => {
  it("lists the caller's sandboxes as OpenHands' SandboxInfo, newest first, and only theirs", async () => {
    const first = await start({});
    const second = await start({});
    const other = await start({}, otherKey);
    const [c1, c2, co] = [
      await conversation(first.id),
      await conversation(second.id),
      await conversation(other.id, otherKey),
    ];

    const items: SandboxInfo[] = [];
    let page: string | null = null;
    do {
      const res: { items: SandboxInfo[]; next_page_id: string | null } = await client.json(
        await api.call(`/api/v1/sandboxes/search?limit=1${page ? `&page_id=${page}` : ""}`, { key }),
      );
      expect(res.items.length).toBeLessThanOrEqual(1);
      items.push(...res.items);
      page = res.next_page_id;
    } while (page);
    const ids = items.map((s) => s.id);
    expect(ids).toContain(c1.sandbox_id);
    expect(ids).toContain(c2.sandbox_id);
    expect(ids).not.toContain(co.sandbox_id);
    expect(ids.indexOf(c2.sandbox_id)).toBeLessThan(ids.indexOf(c1.sandbox_id));
    expect([...items.map((s) => s.created_at)].sort().reverse()).toEqual(items.map((s) => s.created_at));

    const mine = items.find((s) => s.id === c2.sandbox_id);
    expect(mine).toEqual({
      id: c2.sandbox_id,
      created_by_user_id: toHexId(userId),
      sandbox_spec_id: "tern-sandbox:latest",
      status: "RUNNING",
      session_api_key: c2.session_api_key,
      // Its agent server, served by this API (routes/agent-server), on the port of PUBLIC_URL.
      exposed_urls: [{ name: "AGENT_SERVER", url: `http://api.test/agent/${c2.sandbox_id}`, port: 80 }],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
    });
    expect(c2.sandbox_status).toBe("RUNNING");

    // Batch: in the order asked, null for another user's, an unknown id or a malformed one.
    const unknown = randomBytes(16).toString("hex");
    expect(await sandboxes([c1.sandbox_id, co.sandbox_id, unknown, "nope", c2.sandbox_id])).toEqual([
      items.find((s) => s.id === c1.sandbox_id),
      null,
      null,
      null,
      mine,
    ]);
    expect(await sandboxes([co.sandbox_id], otherKey)).toEqual([expect.objectContaining({ id: co.sandbox_id })]);
  });

  it("validates: the batch needs 1 to 100 ids, the search a limit of 1 to 100", async () => {
    const none = await client.json<{ error: { message: string } }>(await api.call("/api/v1/sandboxes", { key }), 422);
    expect(none.error.message).toMatch(/^id:/);
    const many = Array.from({ length: 101 }, () => `id=${randomBytes(16).toString("hex")}`).join("&");
    expect((await api.call(`/api/v1/sandboxes?${many}`, { key })).status).toBe(422);
    const limit = await client.json<{ error: { message: string } }>(
      await api.call("/api/v1/sandboxes/search?limit=0", { key }),
      422,
    );
    expect(limit.error.message).toMatch(/^limit:/);
    expect((await api.call("/api/v1/sandboxes/search?page_id=forged", { key })).status).toBe(400);
  });

  it("pause freezes the sandbox and the run waits; resume continues the same run to the end", async () => {
    // The model's first answer is held until the sandbox is paused: the run then has a command to
    // run in a frozen sandbox, and must wait rather than fail.
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let asked: () => void = () => undefined;
    const llmAsked = new Promise<void>((r) => {
      asked = r;
    });
    llm.push(
      {
        toolCalls: [{ name: "terminal", arguments: { command: "echo resumed-ok" } }],
        before: async () => {
          asked();
          await held;
        },
      },
      { text: "Done." },
    );
    const conv = await start({
      initial_message: { role: "user", content: [{ type: "text", text: "Say it." }], run: true },
    });
    const { sandbox_id: sandboxId } = await conversation(conv.id);
    const ref = await refOf(sandboxId);
    await llmAsked;

    expect(await client.json(await api.call(`/api/v1/sandboxes/${sandboxId}/pause`, { method: "POST", key }))).toEqual({
      success: true,
    });
    // Answered once it took effect: the engine has it frozen, and both records say PAUSED.
    expect((await driver.inspect(ref))?.state).toBe("paused");
    expect((await sandboxes([sandboxId]))[0]?.status).toBe("PAUSED");
    expect((await sandboxes([sandboxId]))[0]?.session_api_key).toBeNull();
    expect((await conversation(conv.id)).sandbox_status).toBe("PAUSED");
    // A frozen sandbox takes no command.
    await expect(driver.exec(ref, { cmd: ["true"] })).rejects.toThrow(/paused/);
    // Reads that need it are refused while it is paused.
    expect((await readFile(conv.id, "x")).status).toBe(409);
    // Pausing again changes nothing.
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}/pause`, { method: "POST", key })).status).toBe(200);

    release();
    // The run (its id is the conversation's: the initial run) stores the model's call, then waits:
    // its job is delayed, not failed, and nothing ran.
    await waitFor(async () => (await runJobState(conv.id, conv.id)) === "delayed", {
      what: "the run's job to wait (delayed) for the sandbox",
    });
    const waiting = await allEvents(conv.id);
    expect(waiting.map((e) => e.kind)).toContain("ActionEvent");
    expect(waiting.map((e) => e.kind)).not.toContain("ObservationEvent");
    expect(waiting.map((e) => e.kind)).not.toContain("AgentErrorEvent");
    expect((await conversation(conv.id)).execution_status).toBe("running");

    expect(await client.json(await api.call(`/api/v1/sandboxes/${sandboxId}/resume`, { method: "POST", key }))).toEqual(
      {
        success: true,
      },
    );
    expect((await driver.inspect(ref))?.state).toBe("running");
    const finished = await waitForExecution(conv.id, ["finished", "error", "stuck"]);
    expect(finished.execution_status).toBe("finished");
    expect(finished.sandbox_status).toBe("RUNNING");

    const events = await allEvents(conv.id);
    expect(events.filter((e) => e.kind !== "ConversationStateUpdateEvent").map((e) => e.kind)).toEqual([
      "SystemPromptEvent",
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "MessageEvent",
    ]);
    // One run from start to end: one `running`, then `finished`.
    expect(events.filter((e) => e.kind === "ConversationStateUpdateEvent").map((e) => e.value)).toEqual([
      "running",
      "finished",
    ]);
    expect(JSON.stringify(events.find((e) => e.kind === "ObservationEvent"))).toContain("resumed-ok");
    const runs = await api.database.db
      .selectFrom("agent_runs")
      .select(["id", "status"])
      .where("conversation_id", "=", parseId(conv.id) ?? "")
      .execute();
    expect(runs).toEqual([{ id: parseId(conv.id), status: "finished" }]);
  });

  it("a command in flight is frozen with its sandbox and finishes after resume", async () => {
    // Timestamps every 20 ms: while the sandbox is frozen none is written, so the command's own
    // output shows a gap at least as long as the pause (a positive trace, not a wait for nothing).
    const script = "for i in $(seq 1 60); do date +%s%3N | tee -a /tmp/ticks; sleep 0.02; done";
    llm.push({ toolCalls: [{ name: "terminal", arguments: { command: script } }] }, { text: "Ticked." });
    const conv = await start({
      initial_message: { role: "user", content: [{ type: "text", text: "Tick." }], run: true },
    });
    const { sandbox_id: sandboxId } = await conversation(conv.id);
    const ref = await refOf(sandboxId);
    await waitFor(
      async () => {
        const r = await driver.exec(ref, { cmd: ["bash", "-c", "wc -l < /tmp/ticks 2>/dev/null || echo 0"] });
        const n = Number(r.stdout.trim());
        if (n >= 60) throw new Error("the command ended before the test could pause it");
        return n >= 2;
      },
      { what: "the command to be running" },
    );
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}/pause`, { method: "POST", key })).status).toBe(200);
    const pausedAt = Date.now();
    // While frozen: the engine says so, a new command is refused, and the run is still going.
    expect((await driver.inspect(ref))?.state).toBe("paused");
    await expect(driver.exec(ref, { cmd: ["true"] })).rejects.toThrow(/paused/);
    expect((await conversation(conv.id)).execution_status).toBe("running");
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}/pause`, { method: "POST", key })).status).toBe(200);
    const resumeAt = Date.now();
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}/resume`, { method: "POST", key })).status).toBe(200);

    expect((await waitForExecution(conv.id, ["finished", "error", "stuck"])).execution_status).toBe("finished");
    const observation = (await allEvents(conv.id)).find((e) => e.kind === "ObservationEvent");
    const ticks = (JSON.stringify(observation).match(/(?<!\d)1\d{12}(?!\d)/g) ?? []).map(Number);
    expect(ticks).toHaveLength(60);
    const gaps = ticks.slice(1).map((t, i) => t - (ticks[i] as number));
    expect(Math.max(...gaps)).toBeGreaterThanOrEqual(resumeAt - pausedAt);
  });

  it("DELETE removes the sandbox; a removed sandbox is gone (410) for pause, resume and reads", async () => {
    const conv = await start({});
    const { sandbox_id: sandboxId } = await conversation(conv.id);
    const ref = await refOf(sandboxId);
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}`, { method: "DELETE", key: otherKey })).status).toBe(404);
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}/pause`, { method: "POST", key: otherKey })).status).toBe(
      404,
    );
    expect((await api.call("/api/v1/sandboxes/not-an-id/resume", { method: "POST", key })).status).toBe(404);

    expect(await client.json(await api.call(`/api/v1/sandboxes/${sandboxId}`, { method: "DELETE", key }))).toEqual({
      success: true,
    });
    expect(await driver.inspect(ref)).toBeNull();
    expect((await sandboxes([sandboxId]))[0]).toMatchObject({
      status: "MISSING",
      session_api_key: null,
      exposed_urls: null,
    });
    expect((await conversation(conv.id)).sandbox_status).toBe("MISSING");
    for (const verb of ["pause", "resume"]) {
      const res = await api.call(`/api/v1/sandboxes/${sandboxId}/${verb}`, { method: "POST", key });
      expect((await client.json<{ error: { code: string } }>(res, 410)).error.code).toBe("gone");
    }
    expect((await readFile(conv.id, "x")).status).toBe(410);
    // Removing again changes nothing; the conversation's record and events stay.
    expect((await api.call(`/api/v1/sandboxes/${sandboxId}`, { method: "DELETE", key })).status).toBe(200);
    expect((await allEvents(conv.id)).length).toBeGreaterThan(0);
  });

  it("refuses commands on a sandbox whose start is still going on (409)", async () => {
    const task = await startTasksRepository(api.database.db).create(userId, {});
    const row = await sandboxesRepository(api.database.db).upsert({
      name: `tern-test-starting-${task.id}`,
      image: "tern-sandbox:latest",
      startTaskId: task.id,
      status: "STARTING",
    });
    // Marked finished, so no worker takes the task up.
    await startTasksRepository(api.database.db).markError(task.id, "test fixture");
    expect(row.userId).toBe(userId);
    for (const [method, path] of [
      ["POST", "pause"],
      ["POST", "resume"],
      ["DELETE", ""],
    ] as const) {
      const res = await api.call(`/api/v1/sandboxes/${toHexId(row.id)}${path ? `/${path}` : ""}`, { method, key });
      expect((await client.json<{ error: { code: string } }>(res, 409)).error.code).toBe("conflict");
    }
  });
});

describe("sandbox specs", () => {
  interface Spec {
    id: string;
    command: string[] | null;
    created_at: string;
    initial_env: Record<string, string>;
    working_dir: string;
  }

  it("lists the images this deployment offers: SANDBOX_IMAGE first, then SANDBOX_IMAGES", async () => {
    const first = await client.json<{ items: Spec[]; next_page_id: string | null }>(
      await api.call("/api/v1/sandbox-specs/search", { key }),
    );
    expect(first.items.map((s) => s.id)).toEqual(["tern-sandbox:latest", OLD_IMAGE]);
    expect(first.next_page_id).toBeNull();
    expect(first.items[0]).toEqual({
      id: "tern-sandbox:latest",
      command: null,
      created_at: expect.stringMatching(/Z$/),
      initial_env: {},
      working_dir: "/workspace",
      added_by_admin: false,
      runtime_images: [],
    });
    // Paged, and the times stay what they were.
    const one = await client.json<{ items: Spec[]; next_page_id: string | null }>(
      await api.call("/api/v1/sandbox-specs/search?limit=1", { key }),
    );
    expect(one.items).toEqual([first.items[0]]);
    const next = await client.json<{ items: Spec[]; next_page_id: string | null }>(
      await api.call(`/api/v1/sandbox-specs/search?limit=1&page_id=${one.next_page_id}`, { key }),
    );
    expect(next).toEqual({ items: [first.items[1]], next_page_id: null });

    expect(
      await client.json(
        await api.call(`/api/v1/sandbox-specs?id=${OLD_IMAGE}&id=nope:1&id=tern-sandbox:latest`, { key }),
      ),
    ).toEqual([first.items[1], null, first.items[0]]);
    expect((await api.call("/api/v1/sandbox-specs", { key })).status).toBe(422);
  });

  it("names a spec for admin keys only; a start of a spec not offered is refused", async () => {
    const asUser = await api.call("/api/v1/sandbox-specs", { key, method: "POST", json: { id: "python:3.12" } });
    expect(asUser.status).toBe(403);
    const notOffered = await api.call("/api/v1/sandboxes?sandbox_spec_id=python:3.12", { key, method: "POST" });
    expect(notOffered.status).toBe(422);
  });
});

describe("the workers' internal HTTP server", () => {
  it("is advertised in Redis, serves /health and /ready, and refuses internal calls without the token", async () => {
    const [entry] = await liveWorkers(api.redis, api.prefix);
    expect(entry?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const url = entry?.url ?? "";
    expect(await client.json(await fetch(`${url}/health`))).toEqual({ status: "ok" });
    expect(await client.json(await fetch(`${url}/ready`))).toMatchObject({ status: "ok" });
    const anyId = randomBytes(16).toString("hex");
    const denied = await fetch(`${url}/internal/sandboxes/${anyId}/file?path=x`);
    expect(denied.status).toBe(401);
    const wrong = await fetch(`${url}/internal/sandboxes/${anyId}/file?path=x`, {
      headers: { authorization: "Bearer wrong-token" },
    });
    expect(wrong.status).toBe(401);
    // Its positive control: the deployment's token on the same call gets past the check, to the
    // sandbox's lookup (there is none of that id: the worker's own 404, not a 401).
    const right = await fetch(`${url}/internal/sandboxes/${anyId}/file?path=x`, {
      headers: { authorization: `Bearer ${api.workerAccess.token}` },
    });
    expect(right.status).toBe(404);
    expect(((await right.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "not_found",
      message: "No such sandbox",
    });
  });

  it("lists every new route in /openapi.json with its schemas", async () => {
    const doc = await client.json<{
      paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>;
      components: { schemas: Record<string, unknown> };
    }>(await api.call("/openapi.json"));
    const routes: [string, string][] = [
      ["/api/v1/sandboxes/search", "get"],
      ["/api/v1/sandboxes", "get"],
      ["/api/v1/sandboxes/{id}/pause", "post"],
      ["/api/v1/sandboxes/{id}/resume", "post"],
      ["/api/v1/sandboxes/{id}", "delete"],
      ["/api/v1/sandbox-specs/search", "get"],
      ["/api/v1/sandbox-specs", "get"],
      ["/api/v1/app-conversations/{conversation_id}/file", "get"],
      ["/api/v1/app-conversations/{conversation_id}/skills", "get"],
      ["/api/v1/app-conversations/{conversation_id}/hooks", "get"],
      ["/api/v1/app-conversations/{conversation_id}/download", "get"],
    ];
    for (const [path, method] of routes) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op?.responses["200"]?.content, `${method} ${path}`).toBeDefined();
    }
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining([
        "SandboxInfo",
        "SandboxPage",
        "SandboxSpecInfo",
        "GetSkillsResponse",
        "GetHooksResponse",
      ]),
    );
    expect(
      Object.keys(
        doc.paths["/api/v1/app-conversations/{conversation_id}/download"]?.get?.responses["200"]?.content ?? {},
      ),
    ).toEqual(["application/zip"]);
  });

  it("with no worker alive, a read that needs a sandbox answers 503", async () => {
    const conv = await start({});
    await api.stack.worker.stop();
    expect(await liveWorkers(api.redis, api.prefix)).toEqual([]);
    const res = await readFile(conv.id, "README.md");
    expect((await client.json<{ error: { code: string } }>(res, 503)).error.code).toBe("service_unavailable");
  });
});
