import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { toHexId } from "@tern/core";
import { conversationsRepository, eventsRepository, sandboxesRepository } from "@tern/db";
import { type SandboxDriver, SandboxLabel } from "@tern/sandbox";
import {
  engineSandboxDriver,
  ensureTestEngine,
  repoRoot,
  type ScriptedLlmServer,
  type ServiceProcess,
  scaled,
  startLlmServer,
  testSandboxDriver,
  testSandboxNetworkName,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

/**
 * Two engines, a worker on each (the main engine, and engine 15 started beside it by
 * scripts/lib/ensure-engine.sh; a number no other test file uses, since this one stops it for
 * good at the end). Every job on a sandbox must run on a worker of the sandbox's engine.
 *
 * Each test sets up what it needs, so a test run alone (-t) or retried means the same: a
 * conversation is placed on an engine on purpose (startOn: the other engine's worker is stopped
 * while it starts, so only this engine's worker takes the start), and a test that needs a state an
 * earlier test leaves (both engines up, engine 15 given up on) brings it about itself when it is
 * not there.
 */
const ENGINE_N = 15;
/** Engine 15's name, set by ENGINE_ID (the main engine's is its own id from `docker info`). */
const E15 = "e15";
const CONVERSATIONS = 4;
const FOLLOW_UPS = 2;

const sh = promisify(execFile);

let h: StartHarness;
let llm: ScriptedLlmServer;
let api: ServiceProcess;
let mainWorker: ServiceProcess;
let e15Worker: ServiceProcess;
let key: string;
let e15Host: string;
let mainDriver: SandboxDriver;
let e15Driver: SandboxDriver;
let mainEngine: string;

/** conversation id → the engine its sandbox is on. */
const placed = new Map<string, string>();
/** The main worker's env beyond workerEnv's: the engine-loss tests give engine 15 up quickly. */
let mainExtra: Record<string, string> = { WORKER_ID: "main-w" };
/** Engine 15 was stopped (by a test, maybe one that failed): the next test that needs it starts it. */
let e15Stopped = false;

const workerEnv = (extra: Record<string, string> = {}) => ({
  ...llm.workerEnv("openai"),
  WORKER_CONCURRENCY: "2",
  JANITOR_INTERVAL_MS: "1000",
  ENGINE_LOST_AFTER: "600",
  ...extra,
});
/** The machine is shared and small: a process may take a while to be ready. */
const slow = { timeoutMs: 120_000 };
const startE15Worker = () =>
  h.startWorker(workerEnv({ DOCKER_HOST: e15Host, ENGINE_ID: E15, WORKER_ID: "e15-w" }), slow);
const startMainWorker = () => h.startWorker(workerEnv(mainExtra), slow);
const alive = (p: ServiceProcess | undefined) =>
  p !== undefined && p.child.exitCode === null && p.child.signalCode === null;

const call = (method: string, path: string, body?: unknown) =>
  fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** The agent's answers so far, and whether any run ended in an error. */
const answers = async (conversationId: string) => {
  const events = await eventsRepository(h.database.db).listAll(conversationId);
  return {
    answered: events.filter((e) => e.kind === "MessageEvent" && e.source === "agent").length,
    errors: events.filter((e) => e.kind === "AgentErrorEvent").map((e) => JSON.stringify(e.payload)),
  };
};

const waitForAnswers = (conversationId: string, n: number, timeoutMs = 60_000) =>
  waitFor(
    async () => {
      const a = await answers(conversationId);
      if (a.errors.length > 0) throw new Error(`run failed in ${conversationId}: ${a.errors.join("; ")}`);
      return a.answered >= n;
    },
    { what: `${n} answers in ${conversationId}`, timeoutMs },
  );

const sendMessage = (conversationId: string, text: string) =>
  call("POST", `/api/v1/conversation/${toHexId(conversationId)}/events`, {
    content: [{ type: "text", text }],
    run: true,
  });

const sandboxOf = async (conversationId: string) => {
  const c = await conversationsRepository(h.database.db).get(conversationId);
  const s = c?.sandboxId ? await sandboxesRepository(h.database.db).get(c.sandboxId) : null;
  if (!s) throw new Error(`no sandbox for ${conversationId}`);
  return s;
};

const driverOf = (engineId: string) => (engineId === E15 ? e15Driver : mainDriver);
const onEngine = (engineId: string) => [...placed].filter(([, e]) => e === engineId).map(([c]) => c);

/** Both engines up, each with its worker, and the main worker as the tests before engine loss run it. */
const bothEnginesServed = async () => {
  if (e15Stopped) {
    const { stdout } = await sh("bash", ["scripts/lib/ensure-engine.sh", String(ENGINE_N)], { cwd: repoRoot });
    e15Host = stdout.trim().split("\n").pop() ?? e15Host;
    e15Stopped = false;
  }
  if (mainExtra.ENGINE_LOST_AFTER) {
    mainExtra = { WORKER_ID: "main-w" };
    await mainWorker.stop();
  }
  if (!alive(mainWorker)) mainWorker = await startMainWorker();
  if (!alive(e15Worker)) e15Worker = await startE15Worker();
};

/**
 * Starts `n` conversations whose sandboxes are on `engine`, each answered once: the other engine's
 * worker is stopped while they start, so only this engine's worker takes the starts (the pull
 * model would otherwise place them by chance).
 */
const startOn = async (engine: string, n: number): Promise<string[]> => {
  const elsewhere = engine === E15 ? mainWorker : e15Worker;
  await elsewhere.stop();
  const ids: string[] = [];
  try {
    const tasks = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const r = await h.post(api, key, {
          initial_message: { role: "user", content: [{ type: "text", text: `hello ${engine} ${i}` }], run: true },
        });
        const body = (await r.json()) as { id: string };
        expect(r.status, JSON.stringify(body)).toBe(200);
        return body.id;
      }),
    );
    for (const taskId of tasks) {
      const { task } = await h.waitForTask(taskId, 120_000);
      expect(task.status, task.detail ?? "").toBe("READY");
      const conversationId = uuidOf(task.appConversationId ?? "");
      const sandbox = await sandboxOf(conversationId);
      expect(sandbox.engineId).toBe(engine);
      // The container is on the engine the row names, labelled with it.
      const info = await driverOf(engine).inspect(sandbox.ref ?? sandbox.name);
      expect(info?.state).toBe("running");
      expect(info?.labels[SandboxLabel.Engine]).toBe(engine);
      placed.set(conversationId, engine);
      ids.push(conversationId);
    }
  } finally {
    if (engine === E15) mainWorker = await startMainWorker();
    else e15Worker = await startE15Worker();
  }
  await Promise.all(ids.map((c) => waitForAnswers(c, 1)));
  return ids;
};

/** A conversation on `engine` whose sandbox runs: one an earlier test made, or a new one. */
const oneOn = async (engine: string): Promise<string> => {
  for (const c of onEngine(engine)) if ((await sandboxOf(c)).status === "RUNNING") return c;
  const [made] = await startOn(engine, 1);
  return made ?? "";
};

/**
 * Engine 15 stopped for good, with at least one conversation on it, and its sandboxes given up on
 * by the main engine's janitor (a short ENGINE_LOST_AFTER): MISSING. Returns the conversations lost.
 */
const loseEngine15 = async (): Promise<string[]> => {
  await bothEnginesServed();
  await oneOn(E15);
  const lost = onEngine(E15);
  await e15Worker.kill();
  await sh("bash", ["scripts/lib/ensure-engine.sh", String(ENGINE_N), "stop"], { cwd: repoRoot });
  e15Stopped = true;
  // The main engine's janitor gives engine 15 up quickly (a short ENGINE_LOST_AFTER).
  await mainWorker.stop();
  mainExtra = { WORKER_ID: "main-w2", ENGINE_LOST_AFTER: "3" };
  mainWorker = await startMainWorker();
  for (const c of lost) {
    await waitFor(async () => (await sandboxOf(c)).status === "MISSING", {
      what: `${c}'s sandbox MISSING`,
      timeoutMs: 30_000,
    });
  }
  return lost;
};

beforeAll(async () => {
  e15Host = await ensureTestEngine(ENGINE_N);
  h = await createStartHarness();
  mainEngine = h.engineId ?? "";
  mainDriver = testSandboxDriver();
  e15Driver = engineSandboxDriver(e15Host, testSandboxNetworkName());
  // Every run answers once with text, whichever conversation asks: no test counts on which reply.
  llm = await startLlmServer();
  llm.setResponder(() => ({ text: "answer" }));
  [api, mainWorker, e15Worker] = await Promise.all([h.startApi(slow), startMainWorker(), startE15Worker()]);
  key = (await h.newUser()).key;
}, 15 * 60_000);

afterAll(async () => {
  if (process.env.TERN_TEST_DEBUG) {
    const { writeFileSync } = await import("node:fs");
    for (const [name, p] of Object.entries({ api, mainWorker, e15Worker }))
      writeFileSync(`/tmp/two-engines-${name}.log`, p?.output() ?? "");
  }
  await llm?.close();
  await h?.close();
  // Whatever a failed test left on engine 15 (started again if a test stopped it).
  await sh("bash", ["scripts/lib/ensure-engine.sh", String(ENGINE_N)], { cwd: repoRoot }).catch(() => undefined);
  const left = await e15Driver?.list({ [SandboxLabel.Namespace]: h.prefix }).catch(() => []);
  await Promise.all((left ?? []).map((c) => e15Driver.destroy(c.ref).catch(() => undefined)));
}, scaled(120_000));

describe("two engines, a worker on each", () => {
  it("starts conversations on both engines, and every run and follow-up answers", {
    timeout: scaled(300_000),
  }, async () => {
    await bothEnginesServed();
    const mine = [...(await startOn(mainEngine, CONVERSATIONS / 2)), ...(await startOn(E15, CONVERSATIONS / 2))];
    // Both workers take jobs now: every follow-up runs on its sandbox's engine, whichever worker is idle.
    for (let n = 1; n <= FOLLOW_UPS; n++) {
      for (const c of mine) expect((await sendMessage(c, `follow-up ${n}`)).status).toBe(200);
      await Promise.all(mine.map((c) => waitForAnswers(c, n + 1)));
    }
    for (const c of mine) expect(await answers(c)).toEqual({ answered: FOLLOW_UPS + 1, errors: [] });
  });

  it("pauses, resumes, and reads files, the diff and the archive whichever engine holds the sandbox", async () => {
    await bothEnginesServed();
    for (const engineId of [mainEngine, E15]) {
      const conversationId = await oneOn(engineId);
      const sandbox = await sandboxOf(conversationId);
      const ref = sandbox.ref ?? sandbox.name;
      const hex = toHexId(sandbox.id);

      const file = await call(
        "GET",
        `/api/v1/app-conversations/${toHexId(conversationId ?? "")}/file?file_path=.git/HEAD`,
      );
      expect(file.status).toBe(200);
      expect(await file.text()).toContain("refs/heads/");
      // The diff and the archive are reads of the sandbox too: served by a worker of its engine.
      const diff = await call("GET", `/api/v1/app-conversations/${toHexId(conversationId ?? "")}/diff?format=json`);
      expect(diff.status).toBe(200);
      await diff.json();
      const tar = await call("GET", `/api/v1/app-conversations/${toHexId(conversationId ?? "")}/workspace.tar.gz`);
      expect(tar.status).toBe(200);
      expect(Buffer.from(await tar.arrayBuffer()).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));

      expect((await call("POST", `/api/v1/sandboxes/${hex}/pause`)).status).toBe(200);
      expect((await driverOf(engineId).inspect(ref))?.state).toBe("paused");
      expect((await sandboxesRepository(h.database.db).get(sandbox.id))?.status).toBe("PAUSED");
      expect((await call("POST", `/api/v1/sandboxes/${hex}/resume`)).status).toBe(200);
      expect((await driverOf(engineId).inspect(ref))?.state).toBe("running");
    }
  });

  it("a killed worker's conversations wait for it, then finish once it is back", async () => {
    await bothEnginesServed();
    const waiting = await oneOn(E15);
    const other = await oneOn(mainEngine);
    const before = { waiting: (await answers(waiting)).answered, other: (await answers(other)).answered };
    await e15Worker.kill();
    expect((await sendMessage(waiting, "while its worker is down")).status).toBe(200);
    expect((await sendMessage(other, "on the engine still served")).status).toBe(200);
    // The other engine goes on...
    await waitForAnswers(other, before.other + 1);
    // ...while this run waits on its engine's queue: not failed, not run elsewhere.
    const runs = await h.queues.forEngine(E15).agentRun.getJobs(["waiting"]);
    expect(runs.map((j) => j.data.conversationId)).toContain(waiting);
    expect(await answers(waiting)).toEqual({ answered: before.waiting, errors: [] });

    e15Worker = await startE15Worker();
    await waitForAnswers(waiting, before.waiting + 1);
  });

  it("DELETE removes a sandbox from whichever engine holds it, and leaves nothing behind", async () => {
    await bothEnginesServed();
    // Each engine keeps one conversation (the engine-loss tests may use them); one more on each goes.
    await oneOn(mainEngine);
    await oneOn(E15);
    const doomed = [...(await startOn(mainEngine, 1)), ...(await startOn(E15, 1))];
    const sandboxes = await Promise.all(doomed.map(sandboxOf));
    for (const c of doomed) expect((await call("DELETE", `/api/v1/app-conversations/${toHexId(c)}`)).status).toBe(200);
    for (const s of sandboxes) {
      await waitFor(async () => (await sandboxesRepository(h.database.db).get(s.id))?.status === "MISSING", {
        what: `sandbox ${s.id} removed`,
      });
      // Gone from both engines.
      expect(await mainDriver.inspect(s.name)).toBeNull();
      expect(await e15Driver.inspect(s.name)).toBeNull();
    }
    for (const c of doomed) placed.delete(c);
    const left = [...(await h.sandboxes()), ...(await e15Driver.list({ [SandboxLabel.Namespace]: h.prefix }))];
    expect(left.map((c) => c.name).sort()).toEqual(
      (await Promise.all([...placed.keys()].map(sandboxOf))).map((s) => s.name).sort(),
    );
  });

  it("an engine stopped for good: its conversations become MISSING with 410, nothing else is disturbed", async () => {
    await bothEnginesServed();
    await oneOn(mainEngine);
    await oneOn(E15);
    const kept = onEngine(mainEngine);
    // What each conversation on engine 15 answered before it was lost: its record and events stay.
    const answeredBefore = new Map(
      await Promise.all(onEngine(E15).map(async (c) => [c, (await answers(c)).answered] as const)),
    );
    const lost = await loseEngine15();
    expect(lost.length).toBeGreaterThan(0);

    for (const c of lost) {
      const res = await sendMessage(c, "anyone there?");
      expect(res.status).toBe(410);
      expect(((await res.json()) as { detail: string }).detail).toMatch(/lost with its engine/);
      // The record and its events stay.
      const got = await call("GET", `/api/v1/app-conversations?ids=${toHexId(c)}`);
      expect(((await got.json()) as { sandbox_status: string }[])[0]?.sandbox_status).toBe("MISSING");
      expect((await answers(c)).answered).toBe(answeredBefore.get(c));
      expect(answeredBefore.get(c)).toBeGreaterThanOrEqual(1);
    }
    // The main engine's conversations are untouched and still answer.
    for (const c of kept) {
      expect((await sandboxOf(c)).status).toBe("RUNNING");
      const before = (await answers(c)).answered;
      expect((await sendMessage(c, "still here?")).status).toBe(200);
      await waitForAnswers(c, before + 1);
    }

    // A new start with the same request lands on the engine that is left.
    const res = await h.post(api, key, {
      initial_message: { role: "user", content: [{ type: "text", text: "again" }], run: true },
    });
    const { task } = await h.waitForTask(((await res.json()) as { id: string }).id, 60_000);
    expect(task.status).toBe("READY");
    const again = uuidOf(task.appConversationId ?? "");
    expect((await sandboxOf(again)).engineId).toBe(mainEngine);
    placed.set(again, mainEngine);
  });

  it("an engine back after it was given up on removes what it held; DELETE leaves nothing on either", async () => {
    // Engine 15 given up on, as the test before leaves it (done here when this test runs alone or again).
    if (!e15Stopped || !mainExtra.ENGINE_LOST_AFTER) await loseEngine15();
    const { stdout } = await sh("bash", ["scripts/lib/ensure-engine.sh", String(ENGINE_N)], { cwd: repoRoot });
    e15Host = stdout.trim().split("\n").pop() ?? e15Host;
    e15Stopped = false;
    e15Worker = await startE15Worker();
    await waitFor(async () => (await e15Driver.list({ [SandboxLabel.Namespace]: h.prefix })).length === 0, {
      what: "engine 15's janitor to remove the sandboxes given up on",
      timeoutMs: 30_000,
    });
    for (const c of onEngine(mainEngine)) {
      expect((await call("DELETE", `/api/v1/app-conversations/${toHexId(c)}`)).status).toBe(200);
    }
    await waitFor(async () => (await h.sandboxes()).length === 0, { what: "no sandbox left on the main engine" });
    expect(await e15Driver.list({ [SandboxLabel.Namespace]: h.prefix })).toEqual([]);
  });
});
