/// <reference lib="dom" />
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { agentRunJobId, enqueueAgentRun } from "@tern/queue";
import type { ScriptedLlmServer, ServiceProcess } from "@tern/testing";
import {
  removeSandboxesOfNamespace,
  scaled,
  startLlmServer,
  startService,
  testRedisUrl,
  testSandboxDriver,
  waitFor,
} from "@tern/testing";
import puppeteer, { type Browser } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

/**
 * Confirmation mode end to end: the real API, a real worker process on the same
 * database and Redis prefix, real sandboxes and the scripted LLM (keyed per conversation, so each
 * test's script is its own). What a call did is read from the sandbox itself: a command appends a
 * line to a file, so "ran exactly once" is a count of lines.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let t: StreamTestApi;
let llm: ScriptedLlmServer;
let worker: ServiceProcess;
let key: string;
let otherKey: string;
const sandboxes = testSandboxDriver();

// The webhook receiver is on loopback over http: allowed for this test's API and worker.
const webhookRules = { WEBHOOK_ALLOW_HTTP: "true", WEBHOOK_ALLOW_PRIVATE: "true" };
let receiver: Server;
const delivered: { type?: string; data?: { conversation_id?: string; execution_status?: string } }[] = [];

const workerEnv = () => ({
  ...webhookRules,
  DATABASE_URL: t.api.database.url,
  REDIS_URL: testRedisUrl(),
  REDIS_PREFIX: t.api.prefix,
  SANDBOX_POOL_SIZE: "0",
  ...llm.workerEnv("openai"),
});

beforeAll(async () => {
  t = await startStreamTestApi(webhookRules);
  llm = await startLlmServer();
  ({ key } = await t.api.newUser());
  ({ key: otherKey } = await t.api.newUser());
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => {
      body += d;
    });
    req.on("end", () => {
      delivered.push(JSON.parse(body));
      res.end("ok");
    });
  }).listen(0, "127.0.0.1");
  await once(receiver, "listening");
  const created = await post("/api/v1/webhooks", {
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
    events: ["conversation.execution_status"],
  });
  if (created.status !== 201 && created.status !== 200) throw new Error(`webhook: ${await created.text()}`);
  worker = await startService("worker", workerEnv());
}, scaled(120_000));

afterAll(async () => {
  receiver?.close();
  await worker?.stop();
  await llm?.close();
  if (t) await removeSandboxesOfNamespace(t.api.prefix);
  await t?.close();
});

interface EventItem {
  id: string;
  kind: string;
  key?: string;
  value?: string;
  tool_name?: string;
  security_risk?: string;
  summary?: string;
  action_id?: string;
  rejection_reason?: string;
  llm_message?: { role: string; content: { text: string }[] };
}

const json = async <T>(res: Response, status = 200): Promise<T> => {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return JSON.parse(text) as T;
};

const post = (path: string, body?: unknown, as = key) =>
  t.api.call(path, { method: "POST", key: as, ...(body === undefined ? {} : { json: body }) });

const conversation = async (id: string) => {
  const [c] = await json<({ execution_status: string; session_api_key: string } | null)[]>(
    await t.api.call(`/api/v1/app-conversations?ids=${id}`, { key }),
  );
  if (!c) throw new Error("conversation not found");
  return c;
};

const events = async (id: string): Promise<EventItem[]> => {
  const all: EventItem[] = [];
  let page: string | null = null;
  do {
    const res: { items: EventItem[]; next_page_id: string | null } = await json(
      await t.api.call(`/api/v1/conversation/${id}/events/search?limit=100${page ? `&page_id=${page}` : ""}`, { key }),
    );
    all.push(...res.items);
    page = res.next_page_id;
  } while (page);
  return all;
};

/** Kinds in order, a status change as its value. */
const kindsOf = (items: EventItem[]) =>
  items.map((e) => (e.kind === "ConversationStateUpdateEvent" ? e.value : e.kind));

const statusIs = (id: string, status: string, what = `the conversation to be ${status}`) =>
  waitFor(async () => (await conversation(id)).execution_status === status, {
    what,
    timeoutMs: 60_000,
    detail: async () => `${JSON.stringify(kindsOf(await events(id)))}\n${worker.output().slice(-3000)}`,
  });

const setSettings = async (body: Record<string, unknown>) => json(await post("/api/v1/settings", body));

/** Starts a conversation keyed `tag` in the scripted LLM; resolves once it is READY. */
const start = async (tag: string): Promise<string> => {
  const task = await json<{ id: string }>(
    await post("/api/v1/app-conversations", {
      initial_message: { role: "user", content: [{ type: "text", text: `${tag}: do the work.` }] },
    }),
  );
  return waitFor(
    async () => {
      const [s] = await json<{ status: string; app_conversation_id: string | null; detail: string | null }[]>(
        await t.api.call(`/api/v1/app-conversations/start-tasks?ids=${task.id}`, { key }),
      );
      if (s?.status === "ERROR") throw new Error(`start failed: ${s.detail}`);
      return s?.status === "READY" && (s.app_conversation_id ?? "");
    },
    { what: `start task ${task.id} to be READY`, timeoutMs: 90_000 },
  );
};

const toUuid = (hex: string) =>
  hex.includes("-")
    ? hex
    : `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;

/** The lines of /tmp/calls in the conversation's sandbox: one per command that ran. */
const callsRan = async (id: string): Promise<string[]> => {
  const [info] = await sandboxes.list({ "tern.namespace": t.api.prefix, "tern.conversation_id": toUuid(id) });
  if (!info) throw new Error("no sandbox");
  const out = await sandboxes.exec(info.ref, { cmd: ["sh", "-c", "cat /tmp/calls 2>/dev/null || true"] });
  return out.stdout.split("\n").filter(Boolean);
};

/** A terminal call that appends `word` to /tmp/calls, with the risk given (undefined: none). */
const mark = (word: string, risk?: string) => ({
  name: "terminal",
  arguments: {
    command: `echo ${word} >> /tmp/calls`,
    summary: `note ${word}`,
    ...(risk === undefined ? {} : { security_risk: risk }),
  },
});

/** The run lock of the conversation, and the jobs on the queue its runs go to (its sandbox's engine's). */
const runHeld = async (id: string) => {
  const db = t.api.database.db;
  const row = await db
    .selectFrom("conversations")
    .leftJoin("sandboxes", "sandboxes.id", "conversations.sandbox_id")
    .select(["conversations.active_run_id", "sandboxes.engine_id"])
    .where("conversations.id", "=", toUuid(id))
    .executeTakeFirstOrThrow();
  const queue = t.api.queues.forEngine(row.engine_id ?? null).agentRun;
  return { activeRunId: row.active_run_id, jobs: await queue.getJobCounts("active", "waiting", "delayed") };
};

/** Enqueues a run straight on the queue, as a stray job would come, and waits for the worker to be done with it. */
const strayRun = async (id: string): Promise<string> => {
  const engineId = (
    await t.api.database.db
      .selectFrom("conversations")
      .innerJoin("sandboxes", "sandboxes.id", "conversations.sandbox_id")
      .select("sandboxes.engine_id")
      .where("conversations.id", "=", toUuid(id))
      .executeTakeFirstOrThrow()
  ).engine_id;
  const runId = await enqueueAgentRun(t.api.queues, toUuid(id), undefined, engineId);
  const queue = t.api.queues.forEngine(engineId).agentRun;
  return waitFor(
    async () => {
      const state = await (await queue.getJob(agentRunJobId(toUuid(id), runId)))?.getState();
      return state === "completed" || state === "failed" ? state : false;
    },
    { what: "the stray run's job to be done", timeoutMs: 30_000 },
  );
};

const respond = (id: string, body: Record<string, unknown>, as = key) =>
  post(`/api/v1/conversation/${id}/events/respond_to_confirmation`, body, as);

/** The tool results the model was sent in its latest request for `tag`, as text. */
const lastToolResults = (tag: string): string[] => {
  const req = llm.requestsFor(tag).at(-1);
  const messages = (req?.body.messages ?? []) as { role: string; content?: unknown }[];
  return messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content));
};

describe("confirmation mode", () => {
  it("ConfirmRisky (the settings' default in confirmation mode) lets LOW and MEDIUM run, stops on HIGH and unknown; accept runs exactly the pending calls once, reject answers each and the agent goes on", async () => {
    await setSettings({ confirmation_mode: true, security_analyzer: "llm" });
    const tag = "risky-table";
    llm.pushFor(
      tag,
      { toolCalls: [mark("low", "LOW")] },
      { toolCalls: [mark("medium", "MEDIUM")] },
      // Two calls in one response: they wait, and run, together.
      { toolCalls: [mark("high", "HIGH"), mark("high-companion", "LOW")] },
      { toolCalls: [mark("unknown")] },
      { toolCalls: [mark("bogus-risk", "CATASTROPHIC")] },
      { text: "I will not do that, then." },
    );
    const id = await start(tag);
    await statusIs(id, "waiting_for_confirmation");
    expect(await callsRan(id)).toEqual(["low", "medium"]);
    let items = await events(id);
    const waiting = items.filter((e) => e.kind === "ActionEvent").slice(-2);
    expect(waiting.map((e) => [e.security_risk, e.summary])).toEqual([
      ["HIGH", "note high"],
      ["LOW", "note high-companion"],
    ]);
    expect(kindsOf(items).slice(-3)).toEqual(["ActionEvent", "ActionEvent", "waiting_for_confirmation"]);
    // The webhook says so too.
    await waitFor(
      () =>
        delivered.some((d) => d.data?.conversation_id === id && d.data.execution_status === "waiting_for_confirmation"),
      {
        what: "the waiting_for_confirmation webhook",
        timeoutMs: 30_000,
        detail: () => JSON.stringify(delivered),
      },
    );
    // The run ended its job: nothing runs, nothing is held while the user decides.
    expect(await runHeld(id)).toEqual({ activeRunId: null, jobs: { active: 0, waiting: 0, delayed: 0 } });
    // POST /run cannot slip past the question.
    expect((await post(`/api/v1/conversation/${id}/run`)).status).toBe(409);
    // Nor can a run whose job comes some other way (a stray or duplicate job): the worker's run
    // lock refuses to begin while calls wait, and nothing is executed or written.
    const stray = await strayRun(id);
    expect(stray).toBe("completed");
    expect(await callsRan(id)).toEqual(["low", "medium"]);
    expect(kindsOf(await events(id))).toEqual(kindsOf(items));
    expect((await conversation(id)).execution_status).toBe("waiting_for_confirmation");
    // Another user's answer is a 404, and changes nothing.
    expect((await respond(id, { accept: true }, otherKey)).status).toBe(404);

    expect(await json(await respond(id, { accept: true }))).toEqual({ success: true });
    // A second answer finds nothing waiting.
    const again = await respond(id, { accept: true });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe("conflict");

    // The unknown-risk call waits next (confirm_unknown), after the accepted ones ran once.
    await waitFor(async () => (await callsRan(id)).includes("high-companion"), { what: "the accepted calls to run" });
    await statusIs(id, "waiting_for_confirmation", "the unknown-risk call to wait");
    expect(await callsRan(id)).toEqual(["low", "medium", "high", "high-companion"]);
    items = await events(id);
    expect(items.filter((e) => e.kind === "ActionEvent").at(-1)?.security_risk).toBe("UNKNOWN");

    expect(await json(await respond(id, { accept: false, reason: "not on my machine" }))).toEqual({ success: true });
    expect((await respond(id, { accept: true })).status).toBe(409);
    // A risk that is no level is unknown too: it waits.
    await statusIs(id, "waiting_for_confirmation", "the call of an invalid risk to wait");
    items = await events(id);
    expect(items.filter((e) => e.kind === "ActionEvent").at(-1)?.security_risk).toBe("UNKNOWN");
    // Rejecting with the session key (the agent server's key may answer, as in OpenHands); no reason: OpenHands' default.
    const { session_api_key } = await conversation(id);
    const bySession = await t.api.call(`/api/v1/conversation/${id}/events/respond_to_confirmation`, {
      method: "POST",
      headers: { "X-Session-API-Key": session_api_key, "content-type": "application/json" },
      body: JSON.stringify({ accept: false }),
    });
    expect(bySession.status).toBe(200);
    await statusIs(id, "finished");

    items = await events(id);
    const rejections = items.filter((e) => e.kind === "UserRejectObservation");
    expect(rejections.map((r) => r.rejection_reason)).toEqual(["not on my machine", "User rejected the action."]);
    const actionIds = items.filter((e) => e.kind === "ActionEvent").map((e) => e.id);
    expect(rejections.map((r) => r.action_id)).toEqual(actionIds.slice(-2));
    // Neither rejected command ran; the model read each rejection as its call's result.
    expect(await callsRan(id)).toEqual(["low", "medium", "high", "high-companion"]);
    expect(lastToolResults(tag).filter((r) => r.includes("Action rejected"))).toEqual([
      expect.stringContaining("Action rejected: not on my machine"),
      expect.stringContaining("Action rejected: User rejected the action."),
    ]);
    // The model was asked for both fields on every tool.
    const tools = (llm.requestsFor(tag)[0]?.body.tools ?? []) as { function: { parameters: { required: string[] } } }[];
    expect(tools.length).toBeGreaterThan(0);
    for (const tool of tools)
      expect(tool.function.parameters.required).toEqual(expect.arrayContaining(["security_risk", "summary"]));
  }, 300_000);

  it("the conversation's own policy overrides the settings and changes while it lives; a message while waiting rejects first", async () => {
    await setSettings({ confirmation_mode: true, security_analyzer: "llm" });
    const tag = "own-policy";
    // NeverConfirm: HIGH runs.
    llm.pushFor(tag, { toolCalls: [mark("never-high", "HIGH")] }, { text: "Done." });
    const id = await start(tag);
    await statusIs(id, "waiting_for_confirmation", "the settings' policy to stop HIGH");
    expect(
      await json(await post(`/api/v1/conversation/${id}/confirmation-policy`, { policy: { kind: "never" } })),
    ).toEqual({
      success: true,
    });
    // Who watches sees the change.
    const change = (await events(id)).at(-1) as EventItem & { value?: unknown };
    expect([change.kind, change.key, change.value]).toEqual([
      "ConversationStateUpdateEvent",
      "confirmation_policy",
      { kind: "NeverConfirm" },
    ]);
    await json(await respond(id, { accept: true }));
    await statusIs(id, "finished");
    expect(await callsRan(id)).toEqual(["never-high"]);

    // Still NeverConfirm: a HIGH call runs without a question.
    llm.pushFor(tag, { toolCalls: [mark("never-high-2", "HIGH")] }, { text: "Done again." });
    await json(
      await post(`/api/v1/conversation/${id}/events`, {
        role: "user",
        content: [{ type: "text", text: "Again." }],
        run: true,
      }),
    );
    // It was `finished` already: wait for the second finish.
    await waitFor(async () => kindsOf(await events(id)).filter((k) => k === "finished").length === 2, {
      what: "the second run to finish",
      timeoutMs: 60_000,
    });
    expect(await callsRan(id)).toEqual(["never-high", "never-high-2"]);

    // AlwaysConfirm (the agent server's path and OpenHands' kind name): even LOW waits.
    await json(await post(`/api/v1/conversation/${id}/confirmation_policy`, { policy: { kind: "AlwaysConfirm" } }));
    llm.pushFor(tag, { toolCalls: [mark("always-low", "LOW")] }, { text: "Understood, I will not." });
    await json(
      await post(`/api/v1/conversation/${id}/events`, {
        role: "user",
        content: [{ type: "text", text: "Once more." }],
        run: true,
      }),
    );
    await statusIs(id, "waiting_for_confirmation", "AlwaysConfirm to stop a LOW call");
    // A pause while calls wait keeps them waiting: it must not turn into a way past the question.
    await json(await post(`/api/v1/conversation/${id}/pause`));
    expect((await conversation(id)).execution_status).toBe("waiting_for_confirmation");
    expect((await post(`/api/v1/conversation/${id}/run`)).status).toBe(409);

    // A new message while waiting: the pending call is rejected first, then the message is the agent's to answer.
    await json(
      await post(`/api/v1/conversation/${id}/events`, {
        role: "user",
        content: [{ type: "text", text: "Skip that." }],
        run: true,
      }),
    );
    await statusIs(id, "finished");
    expect(await callsRan(id)).toEqual(["never-high", "never-high-2"]);
    const items = await events(id);
    const tail = kindsOf(items).slice(-9);
    expect(tail).toEqual([
      "ActionEvent",
      "waiting_for_confirmation",
      "PauseEvent",
      "UserRejectObservation",
      "idle",
      "MessageEvent",
      "running",
      "MessageEvent",
      "finished",
    ]);
    // Answering now is too late.
    expect((await respond(id, { accept: false })).status).toBe(409);
    // A bad policy is a 422 with a JSON error; ConfirmRisky cannot take UNKNOWN as its threshold.
    const bad = await post(`/api/v1/conversation/${id}/confirmation-policy`, {
      policy: { kind: "ConfirmRisky", threshold: "UNKNOWN" },
    });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBeTruthy();
    expect(
      (await post(`/api/v1/conversation/${id}/confirmation-policy`, { policy: { kind: "never" } }, otherKey)).status,
    ).toBe(404);
  }, 300_000);

  it("every policy against every risk, as OpenHands' table says: which calls wait, and each runs once", async () => {
    // The settings' ConfirmRisky holds the first call (HIGH) until each conversation has its own
    // policy; from then on each call of a known risk (and one with none) is met by that policy. The
    // analyzer stays `llm`: with `none` no risk the model gives is gone by (every call is UNKNOWN).
    await setSettings({ confirmation_mode: true, security_analyzer: "llm" });
    const risks = ["LOW", "MEDIUM", "HIGH", undefined] as const;
    const table: { policy: Record<string, unknown>; waits: string[] }[] = [
      { policy: { kind: "NeverConfirm" }, waits: [] },
      { policy: { kind: "AlwaysConfirm" }, waits: ["LOW", "MEDIUM", "HIGH", "UNKNOWN"] },
      // OpenHands' defaults: threshold HIGH (reflexive), unknown confirmed.
      { policy: { kind: "ConfirmRisky" }, waits: ["HIGH", "UNKNOWN"] },
      { policy: { kind: "ConfirmRisky", threshold: "MEDIUM", confirm_unknown: false }, waits: ["MEDIUM", "HIGH"] },
    ];
    const outcomes = await Promise.all(
      table.map(async ({ policy }, row) => {
        const tag = `table-${row}`;
        llm.pushFor(
          tag,
          { toolCalls: [mark(`${row}-first`, "HIGH")] },
          ...risks.map((risk) => ({ toolCalls: [mark(`${row}-${risk ?? "UNKNOWN"}`, risk)] })),
          { text: "All done." },
        );
        const id = await start(tag);
        await statusIs(id, "waiting_for_confirmation", "the settings' policy to hold the first call");
        await json(await post(`/api/v1/conversation/${id}/confirmation-policy`, { policy }));
        await json(await respond(id, { accept: true }));
        const waited: string[] = [];
        for (;;) {
          const status = await waitFor(
            async () => {
              const now = (await conversation(id)).execution_status;
              return (now === "waiting_for_confirmation" || now === "finished") && now;
            },
            { what: `${tag} to wait or finish`, timeoutMs: 60_000 },
          );
          if (status === "finished") break;
          const pending = (await events(id)).filter((e) => e.kind === "ActionEvent").at(-1);
          waited.push(String(pending?.security_risk));
          await json(await respond(id, { accept: true }));
        }
        return { waited, ran: await callsRan(id) };
      }),
    );
    for (const [row, { policy, waits }] of table.entries()) {
      expect({ policy, waited: outcomes[row]?.waited }).toEqual({ policy, waited: waits });
      // Every call ran, once, in order: waiting changes when a call runs, never whether or how often.
      expect(outcomes[row]?.ran).toEqual([`${row}-first`, ...risks.map((r) => `${row}-${r ?? "UNKNOWN"}`)]);
    }
  }, 300_000);

  it("a worker killed while calls wait changes nothing: a new worker runs them on accept, once", async () => {
    await setSettings({ confirmation_mode: true, security_analyzer: "none" });
    const tag = "killed-while-waiting";
    llm.pushFor(tag, { toolCalls: [mark("after-kill", "LOW")] }, { text: "Done after the restart." });
    const id = await start(tag);
    // No analyzer: the model's LOW is not gone by, every call waits (AlwaysConfirm).
    await statusIs(id, "waiting_for_confirmation");
    const before = await events(id);
    await worker.kill();
    worker = await startService("worker", workerEnv());
    expect(await events(id)).toEqual(before);
    expect((await conversation(id)).execution_status).toBe("waiting_for_confirmation");
    // Two answers at once (a double click, two tabs): one is taken, the other is a 409.
    const answers = await Promise.all([respond(id, { accept: true }), respond(id, { accept: true })]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    await statusIs(id, "finished");
    expect(await callsRan(id)).toEqual(["after-kill"]);
  }, 300_000);

  it("the page shows each pending call with its risk and summary, and Approve / Reject work in headless Chromium", async () => {
    await setSettings({ confirmation_mode: true, security_analyzer: "llm" });
    const tag = "page-buttons";
    llm.pushFor(
      tag,
      { toolCalls: [mark("page-approved", "HIGH")] },
      { toolCalls: [mark("page-rejected", "HIGH")] },
      { text: "Fine, stopping." },
    );
    const id = await start(tag);
    await statusIs(id, "waiting_for_confirmation");
    const browser: Browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    });
    try {
      const page = await browser.newPage();
      await page.goto(`${t.url()}/conversations/${id}`);
      await page.waitForSelector("#sign-in:not([hidden])");
      await page.type("#key", key);
      await page.click("#sign-in-form button[type=submit]");
      await page.waitForSelector("#confirmation:not([hidden])");
      const shown = await page.$$eval("#pending-actions li", (els) =>
        els.map((e) => [
          e.querySelector(".risk")?.textContent,
          e.querySelector(".tool")?.textContent,
          e.querySelector(".summary")?.textContent,
        ]),
      );
      // A tool of the agent's registry by its name; one of an MCP server's would say so.
      expect(shown).toEqual([["HIGH", "terminal", "note page-approved"]]);
      await page.click("#approve");
      // The next call waits in turn: the list shows it, live.
      await page.waitForFunction(
        () => document.querySelector("#pending-actions .summary")?.textContent === "note page-rejected",
        { timeout: scaled(60_000) },
      );
      expect(await callsRan(id)).toEqual(["page-approved"]);
      await page.type("#reject-reason", "not from the page");
      await page.click("#reject");
      await page.waitForFunction(() => document.querySelector("#execution-status")?.textContent === "finished", {
        timeout: scaled(60_000),
      });
      expect(await page.$eval("#confirmation", (e) => (e as HTMLElement).hidden)).toBe(true);
      expect(await callsRan(id)).toEqual(["page-approved"]);
      const rejection = (await events(id)).find((e) => e.kind === "UserRejectObservation");
      expect(rejection?.rejection_reason).toBe("not from the page");
    } finally {
      await browser.close();
    }
  }, 300_000);
});
