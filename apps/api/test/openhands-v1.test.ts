import { randomUUID } from "node:crypto";
import { newId, parseId, toHexId } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import {
  type ApiClient,
  createConversationFixture,
  type GitServer,
  type ScriptedLlmServer,
  scaled,
  waitFor,
} from "@tern/testing";
import { unzipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * OpenHands V1 drop-in compatibility, written from OpenHands' models (AppConversationStartRequest,
 * AppConversation, AppConversationStartTask, AppSendMessageRequest/Response, the search and count
 * parameters, the events batch get, pending messages): shapes, defaults and error codes, end to
 * end against a real worker process, real sandboxes, a git server and the scripted LLM.
 *
 * Each test sets up what it needs, so a test run alone (-t) or retried means the same: the
 * conversations several tests read are made once, by whichever test needs one first (`lazily`),
 * and the scripted LLM answers each conversation from its own replies, keyed by its first message
 * (`pushFor`), whatever else runs.
 */
let api: TestApi;
let llm: ScriptedLlmServer;
let git: GitServer;
let client: ApiClient;
let key: string;
let userId: string;
let otherKey: string;

beforeAll(async () => {
  api = await startTestApi({ worker: true, git: true, llm: true, processTimeoutMs: 90_000 });
  llm = api.stack.llm;
  git = api.stack.git;
  await git.createFixtureRepo("yourusername/your-repo", { "README.md": "# your repo\n" });
  ({ key, userId } = await api.newUser());
  ({ key: otherKey } = await api.newUser());
  client = api.client(key);
}, scaled(180_000));

afterAll(async () => api?.close());

interface StartTask {
  id: string;
  created_by_user_id: string;
  status: string;
  detail: string | null;
  app_conversation_id: string | null;
  sandbox_id: string | null;
  agent_server_url: string | null;
  request: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

interface Conversation {
  id: string;
  title: string;
  sandbox_id: string;
  sandbox_status: string;
  execution_status: string;
  conversation_url: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: string | null;
  trigger: string | null;
  pr_number: number[];
  parent_conversation_id: string | null;
  sub_conversation_ids: string[];
  public: boolean | null;
  agent_type: string;
  created_at: string;
  updated_at: string;
}

interface EventItem {
  id: string;
  kind: string;
  source: string;
  value?: unknown;
  [k: string]: unknown;
}

interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

const text = (t: string) => [{ type: "text", text: t }];

/** The docs' polling loop: start-tasks?ids= until READY; returns the conversation id. */
const pollUntilReady = (taskId: string, who = key): Promise<string> => client.as(who).waitForStart(taskId);

const start = async (body: Record<string, unknown>, who = key) => client.as(who).start<StartTask>(body);

const conversation = (id: string, who = key) => client.as(who).conversation<Conversation>(id);

/** The docs' second loop: until execution_status is terminal. */
const waitForTerminal = (id: string) => client.waitForExecution<Conversation>(id, ["finished", "error", "stuck"]);

const allEvents = (id: string) => client.events<EventItem>(id);

/** Made once, when a test first needs it; made again if that failed. */
const lazily = <T>(make: () => Promise<T>): (() => Promise<T>) => {
  let made: Promise<T> | undefined;
  return () =>
    (made ??= make().catch((err: unknown) => {
      made = undefined;
      throw err;
    }));
};

/** Waits until the replies scripted for `llmKey` are used up and the run that used them ended. */
const settle = (id: string, llmKey: string) => client.settle<Conversation>(id, () => llm.remainingFor(llmKey));

const userTexts = (events: EventItem[]) =>
  events
    .filter((e) => e.kind === "MessageEvent" && e.source === "user")
    .map(
      (e) =>
        (e.llm_message as { content: { type: string; text?: string }[] }).content.find((c) => c.type === "text")?.text,
    );

/** Every item of a listing, following next_page_id with `limit`. */
const everyItem = async <T>(path: string, limit: number): Promise<T[]> => {
  const out: T[] = [];
  let page: string | null = null;
  const sep = path.includes("?") ? "&" : "?";
  do {
    const res: Page<T> = await client.json(
      await api.call(`${path}${sep}limit=${limit}${page ? `&page_id=${encodeURIComponent(page)}` : ""}`, { key }),
    );
    out.push(...res.items);
    page = res.next_page_id;
  } while (page);
  return out;
};

const README_ASK = "Check the README and summarise it.";
/** The docs' example, started and finished: what the polling tests read. */
const polledConversation = lazily(async () => {
  llm.pushFor(
    README_ASK,
    { toolCalls: [{ name: "terminal", arguments: { command: "cat README.md" } }] },
    { text: "The repository has a README." },
  );
  // Exactly the docs' body: no `role`, no `run`.
  const started = await start({
    initial_message: { content: [{ type: "text", text: README_ASK }] },
    selected_repository: "yourusername/your-repo",
  });
  return { ...started, done: await waitForTerminal(started.id) };
});

describe("the docs' Complete Polling Example, unchanged", () => {
  it("starts without role or run, reaches READY, and its agent finishes", async () => {
    const polled = await polledConversation();
    expect(polled.task).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f]{32}$/),
      created_by_user_id: toHexId(userId),
      status: "WORKING",
      detail: null,
      app_conversation_id: null,
      request: {
        initial_message: { role: "user", content: text("Check the README and summarise it.") },
        selected_repository: "yourusername/your-repo",
      },
    });
    const { done } = polled;
    expect(done.execution_status).toBe("finished");
    expect(done).toMatchObject({
      id: polled.id,
      title: `Conversation ${polled.id.slice(0, 5)}`,
      sandbox_status: "RUNNING",
      selected_repository: "yourusername/your-repo",
      trigger: null,
      pr_number: [],
      parent_conversation_id: null,
      sub_conversation_ids: [],
      public: null,
      agent_type: "default",
      conversation_url: expect.stringContaining(polled.id),
      // Its sandbox's agent server, which this API serves.
      agent_server_url: `${api.config.publicUrl}/agent/${done.sandbox_id}`,
    });
    expect(JSON.stringify((await allEvents(polled.id)).find((e) => e.kind === "ObservationEvent"))).toContain(
      "your repo",
    );
  });

  it("downloads a zip holding the record and every event; a start task's id is 404", async () => {
    const polled = await polledConversation();
    const res = await api.call(`/api/v1/app-conversations/${polled.id}/download`, { key });
    expect(res.status).toBe(200);
    const files = unzipSync(new Uint8Array(await res.arrayBuffer()));
    const events = await allEvents(polled.id);
    const eventFiles = Object.keys(files).filter((f) => f.startsWith("event_"));
    expect(eventFiles).toHaveLength(events.length);
    expect(eventFiles.map((f) => f.slice("event_000000_".length, -".json".length))).toEqual(events.map((e) => e.id));
    expect(JSON.parse(new TextDecoder().decode(files["meta.json"]))).toMatchObject({ id: polled.id });
    expect((await api.call(`/api/v1/app-conversations/${polled.task.id}/download`, { key })).status).toBe(404);
    expect((await api.call(`/api/v1/app-conversations/${polled.id}/download`, { key: otherKey })).status).toBe(404);
  });

  it("GET /conversation/{id}/events?id= answers in the order asked, null for misses", async () => {
    const polled = await polledConversation();
    const events = await allEvents(polled.id);
    const [a, b] = [events[2]!, events[0]!];
    const asked = [a.id, "not-an-id", b.id.replaceAll("-", ""), randomUUID()];
    const got = await client.json<(EventItem | null)[]>(
      await api.call(`/api/v1/conversation/${polled.id}/events?${asked.map((i) => `id=${i}`).join("&")}`, { key }),
    );
    expect(got).toEqual([a, null, b, null]);
    expect((await api.call(`/api/v1/conversation/${polled.id}/events?id=${a.id}`, { key: otherKey })).status).toBe(404);
    expect((await api.call(`/api/v1/conversation/${polled.id}/events`, { key })).status).toBe(422);
  });

  it("send-message without run runs the agent; run: false only stores", async () => {
    const polled = await polledConversation();
    llm.pushFor(README_ASK, { text: "Second answer." });
    const answer = await client.json<{ success: boolean; sandbox_status: string; message: string | null }>(
      await api.call(`/api/v1/app-conversations/${polled.id}/send-message`, {
        method: "POST",
        key,
        json: { content: text("And now?") },
      }),
    );
    expect(answer).toEqual({ success: true, sandbox_status: "RUNNING", message: expect.any(String) });
    expect((await settle(polled.id, README_ASK)).execution_status).toBe("finished");
    expect(JSON.stringify(llm.requestsFor(README_ASK).at(-1)?.body)).toContain("And now?");

    const asked = llm.requestsFor(README_ASK).length;
    await client.json(
      await api.call(`/api/v1/app-conversations/${polled.id}/send-message`, {
        method: "POST",
        key,
        json: { role: "user", content: text("Quiet."), run: false },
      }),
    );
    expect(userTexts(await allEvents(polled.id)).at(-1)).toBe("Quiet.");
    expect(llm.requestsFor(README_ASK).length).toBe(asked);
  });

  it("send-message: 404 for another user's, 422 naming the field", async () => {
    const polled = await polledConversation();
    const other = await api.call(`/api/v1/app-conversations/${polled.id}/send-message`, {
      method: "POST",
      key: otherKey,
      json: { content: text("x") },
    });
    expect(other.status).toBe(404);
    const bad = await client.json<{ error: { message: string }; detail: string }>(
      await api.call(`/api/v1/app-conversations/${polled.id}/send-message`, {
        method: "POST",
        key,
        json: { content: [] },
      }),
      422,
    );
    expect(bad.error.message).toMatch(/^content:/);
    expect(bad.detail).toBe(bad.error.message);
  });
});

const CAT_ASK = "What is in the picture?";
const catConversationId = randomUUID();
/** A start with every V1 field, settled: the start-field tests and the searches read it. */
const catConversation = lazily(async () => {
  llm.pushFor(CAT_ASK, { text: "Looked at the cat." });
  const body = {
    conversation_id: catConversationId,
    initial_message: {
      role: "user",
      content: [
        { type: "text", text: CAT_ASK, cache_prompt: false },
        { type: "image", image_urls: ["https://images.example.test/cat.png"] },
      ],
      run: false,
    },
    system_message_suffix: "Answer in haiku.",
    llm_model: "scripted-model",
    title: "Cat question",
    trigger: "openhands_api",
    pr_number: [7, 12],
    agent_type: "plan",
    public: true,
    sandbox_id: null,
    processors: [{ kind: "unknown" }],
    some_future_field: { x: 1 },
  };
  const started = await start(body);
  return { ...started, done: await settle(started.id, CAT_ASK) };
});

describe("every V1 start field", () => {
  const conversationId = catConversationId;

  it("is accepted, echoed in `request`, and does what OpenHands does; unknown fields are ignored", async () => {
    const { task, id, done } = await catConversation();
    expect(id).toBe(toHexId(conversationId));
    expect(task.request).not.toHaveProperty("some_future_field");
    expect(task.request).not.toHaveProperty("processors");
    expect(task.request).toMatchObject({
      conversation_id: conversationId,
      title: "Cat question",
      trigger: "openhands_api",
      pr_number: [7, 12],
      agent_type: "plan",
      public: true,
      system_message_suffix: "Answer in haiku.",
      llm_model: "scripted-model",
    });
    // The initial message ran although run was false, and the image reached the model as an image part.
    expect(done).toMatchObject({
      title: "Cat question",
      trigger: "openhands_api",
      pr_number: [7, 12],
      agent_type: "plan",
      public: true,
      llm_model: "scripted-model",
    });
    const sent = llm.requestsFor(CAT_ASK).at(-1)?.body as { messages: { role: string; content: unknown }[] };
    const user = sent.messages.find((m) => m.role === "user");
    expect(user?.content).toEqual([
      { type: "text", text: expect.stringContaining("What is in the picture?") },
      { type: "image_url", image_url: { url: "https://images.example.test/cat.png" } },
    ]);
    const system = sent.messages.find((m) => m.role === "system");
    expect(JSON.stringify(system?.content)).toContain("Answer in haiku.");
    expect(JSON.stringify(system?.content)).toContain("planning mode");
  });

  it("a taken conversation_id is 409", async () => {
    await catConversation();
    const res = await api.call("/api/v1/app-conversations", {
      method: "POST",
      key,
      json: { conversation_id: conversationId.replaceAll("-", "") },
    });
    expect(res.status).toBe(409);
  });

  it("parent_conversation_id: the child inherits, the parent lists it, searches leave it out unless asked", async () => {
    const parentId = (await catConversation()).id;
    expect(
      (
        await api.call("/api/v1/app-conversations", {
          method: "POST",
          key: otherKey,
          json: { parent_conversation_id: parentId },
        })
      ).status,
    ).toBe(404);
    llm.pushFor("Child task", { text: "Child done." });
    const child = await start({ parent_conversation_id: parentId, initial_message: { content: text("Child task") } });
    const childId = child.id;
    await settle(childId, "Child task");
    // Kept as a dashed uuid (OpenHands serializes the request's plain UUIDs so); the model is the parent's.
    expect(child.task.request).toMatchObject({
      parent_conversation_id: parseId(parentId),
      llm_model: "scripted-model",
    });
    const c = await conversation(childId);
    expect(c.parent_conversation_id).toBe(parentId);
    // A retry of this test adds a child of its own: the parent lists every one.
    expect((await conversation(parentId)).sub_conversation_ids).toContain(childId);
    const plain = await everyItem<Conversation>("/api/v1/app-conversations/search", 100);
    expect(plain.map((x) => x.id)).not.toContain(childId);
    const all = await everyItem<Conversation>("/api/v1/app-conversations/search?include_sub_conversations=true", 100);
    expect(all.map((x) => x.id)).toContain(childId);
    expect(
      await client.json<number>(
        await api.call("/api/v1/app-conversations/count?include_sub_conversations=true", { key }),
      ),
    ).toBe(all.length);
  });

  it("bad start input is 422 naming the field", async () => {
    const cases: [unknown, RegExp][] = [
      [{ initial_message: { role: "assistant", content: text("x") } }, /^initial_message\.role:/],
      [
        { initial_message: { content: [{ type: "image", image_urls: ["file:///etc/passwd"] }] } },
        /^initial_message\.content\.0\.image_urls\.0:/,
      ],
      [{ initial_message: { content: [{ type: "video", url: "x" }] } }, /^initial_message\.content\.0/],
      [{ conversation_id: "nope" }, /^conversation_id:/],
      [{ trigger: "carrier_pigeon" }, /^trigger:/],
      [{ agent_type: "chaos" }, /^agent_type:/],
      [{ pr_number: ["seven"] }, /^pr_number\.0:/],
    ];
    for (const [body, field] of cases) {
      const res = await client.json<{ error: { message: string } }>(
        await api.call("/api/v1/app-conversations", { method: "POST", key, json: body }),
        422,
      );
      expect(res.error.message).toMatch(field);
    }
  });
});

describe("searches, counts and PATCH", () => {
  it("app-conversations search filters and sort orders; counts equal the searches' totals", async () => {
    // At least two conversations, one of them the cat question.
    await polledConversation();
    await catConversation();
    const every = await everyItem<Conversation>("/api/v1/app-conversations/search", 1);
    expect(every.length).toBeGreaterThanOrEqual(2);
    expect(await client.json<number>(await api.call("/api/v1/app-conversations/count", { key }))).toBe(every.length);
    // Newest first by default.
    expect(every.map((c) => c.created_at)).toEqual([...every.map((c) => c.created_at)].sort().reverse());

    const byTitle = await everyItem<Conversation>("/api/v1/app-conversations/search?sort_order=TITLE", 1);
    expect(byTitle.map((c) => c.title)).toEqual([...byTitle.map((c) => c.title)].sort((a, b) => (a < b ? -1 : 1)));
    const byTitleDesc = await everyItem<Conversation>("/api/v1/app-conversations/search?sort_order=TITLE_DESC", 1);
    expect(byTitleDesc.map((c) => c.id)).toEqual(byTitle.map((c) => c.id).reverse());
    const byUpdated = await everyItem<Conversation>("/api/v1/app-conversations/search?sort_order=UPDATED_AT", 1);
    expect(byUpdated.map((c) => c.updated_at)).toEqual([...byUpdated.map((c) => c.updated_at)].sort());
    const oldest = await everyItem<Conversation>("/api/v1/app-conversations/search?sort_order=CREATED_AT", 1);
    expect(oldest.map((c) => c.id)).toEqual(every.map((c) => c.id).reverse());

    const filters = [
      "title__contains=cat%20QUEST",
      `created_at__gte=${encodeURIComponent(every.at(-1)!.created_at)}`,
      `created_at__lt=${encodeURIComponent(every[0]!.created_at)}`,
      `updated_at__gte=${encodeURIComponent(every[0]!.updated_at)}`,
      `updated_at__lt=2000-01-01T00:00:00Z`,
      `sandbox_id__eq=${every[0]!.sandbox_id}`,
      "sandbox_id__eq=not-an-id",
      "title__contains=%25",
    ];
    for (const f of filters) {
      const items = await everyItem<Conversation>(`/api/v1/app-conversations/search?${f}`, 1);
      expect(await client.json<number>(await api.call(`/api/v1/app-conversations/count?${f}`, { key })), f).toBe(
        items.length,
      );
    }
    const cats = await everyItem<Conversation>("/api/v1/app-conversations/search?title__contains=cat%20QUEST", 10);
    expect(cats.map((c) => c.title)).toEqual(["Cat question"]);
    const sandboxed = await everyItem<Conversation>(
      `/api/v1/app-conversations/search?sandbox_id__eq=${every[0]!.sandbox_id}`,
      10,
    );
    expect(sandboxed.map((c) => c.id)).toEqual([every[0]!.id]);
    expect(await client.json<number>(await api.call("/api/v1/app-conversations/count", { key: otherKey }))).toBe(0);

    // A cursor is bound to its order and filters.
    const first = await client.json<Page<Conversation>>(
      await api.call("/api/v1/app-conversations/search?limit=1", { key }),
    );
    expect(
      (
        await api.call(`/api/v1/app-conversations/search?limit=1&sort_order=TITLE&page_id=${first.next_page_id}`, {
          key,
        })
      ).status,
    ).toBe(400);
    for (const bad of ["sort_order=NEWEST", "created_at__gte=yesterday", "limit=0"]) {
      const res = await client.json<{ error: { message: string } }>(
        await api.call(`/api/v1/app-conversations/search?${bad}`, { key }),
        422,
      );
      expect(res.error.message.split(":")[0]).toBe(bad.split("=")[0]);
    }
  });

  it("start-tasks search filters and sort orders; count equals the search's total", async () => {
    // At least one READY task.
    await polledConversation();
    const every = await everyItem<StartTask>("/api/v1/app-conversations/start-tasks/search", 1);
    expect(await client.json<number>(await api.call("/api/v1/app-conversations/start-tasks/count", { key }))).toBe(
      every.length,
    );
    const oldest = await everyItem<StartTask>("/api/v1/app-conversations/start-tasks/search?sort_order=CREATED_AT", 2);
    expect(oldest.map((t) => t.id)).toEqual(every.map((t) => t.id).reverse());
    const updated = await everyItem<StartTask>(
      "/api/v1/app-conversations/start-tasks/search?sort_order=UPDATED_AT_DESC",
      2,
    );
    expect(updated.map((t) => t.updated_at)).toEqual([...updated.map((t) => t.updated_at)].sort().reverse());
    const ready = every.find((t) => t.app_conversation_id)!;
    for (const f of [
      `conversation_id__eq=${ready.app_conversation_id}`,
      `created_at__gte=${encodeURIComponent(ready.created_at)}`,
      `updated_at__lt=${encodeURIComponent(ready.updated_at)}`,
    ]) {
      const items = await everyItem<StartTask>(`/api/v1/app-conversations/start-tasks/search?${f}`, 1);
      expect(
        await client.json<number>(await api.call(`/api/v1/app-conversations/start-tasks/count?${f}`, { key })),
        f,
      ).toBe(items.length);
    }
    const mine = await everyItem<StartTask>(
      `/api/v1/app-conversations/start-tasks/search?conversation_id__eq=${ready.app_conversation_id}`,
      5,
    );
    expect(mine.map((t) => t.id)).toEqual([ready.id]);
    expect(
      await client.json<number>(await api.call("/api/v1/app-conversations/start-tasks/count", { key: otherKey })),
    ).toBe(0);
    expect((await api.call("/api/v1/app-conversations/start-tasks/search?sort_order=TITLE", { key })).status).toBe(422);
  });

  it("PATCH changes only the fields given; validates them; another user's is 404", async () => {
    // A conversation of its own (of a user of its own): no other test reads what this one changes.
    const owner = await api.newUser();
    const made = await createConversationFixture(api.database.db, { userId: owner.userId, title: "Patch target" });
    const id = toHexId(made.conversationId);
    const target = await conversation(id, owner.key);
    const patched = await client.json<Conversation>(
      await api.call(`/api/v1/app-conversations/${id}`, {
        method: "PATCH",
        key: owner.key,
        json: { title: "Renamed", public: false, selected_repository: "acme/other", selected_branch: "dev" },
      }),
    );
    expect(patched).toMatchObject({
      id,
      title: "Renamed",
      public: false,
      selected_repository: "acme/other",
      selected_branch: "dev",
      trigger: target.trigger,
      agent_type: target.agent_type,
    });
    expect(patched.updated_at > target.updated_at).toBe(true);
    const bad: [unknown, RegExp][] = [
      [{ selected_repository: "no-slash" }, /^selected_repository:/],
      [{ selected_repository: null }, /^selected_branch:/],
      [{ selected_branch: "bad..branch" }, /^selected_branch:/],
      [{ title: "" }, /^title:/],
      [{ git_provider: "sourceforge" }, /^git_provider:/],
    ];
    for (const [body, field] of bad) {
      const res = await client.json<{ error: { message: string } }>(
        await api.call(`/api/v1/app-conversations/${id}`, { method: "PATCH", key: owner.key, json: body }),
        422,
      );
      expect(res.error.message).toMatch(field);
    }
    const cleared = await client.json<Conversation>(
      await api.call(`/api/v1/app-conversations/${id}`, {
        method: "PATCH",
        key: owner.key,
        json: { selected_repository: null, selected_branch: null, git_provider: null },
      }),
    );
    expect(cleared).toMatchObject({ selected_repository: null, selected_branch: null, title: "Renamed" });
    expect(
      (await api.call(`/api/v1/app-conversations/${id}`, { method: "PATCH", key: otherKey, json: { title: "x" } }))
        .status,
    ).toBe(404);
  });
});

describe("stream-start and pending messages", () => {
  it("stream-start streams one snapshot per stage, WORKING to READY, as one JSON array", async () => {
    llm.pushFor("Hello from the stream", { text: "Streamed." });
    const res = await api.call("/api/v1/app-conversations/stream-start", {
      method: "POST",
      key,
      json: { initial_message: { content: text("Hello from the stream") } },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const snapshots = JSON.parse(await res.text()) as StartTask[];
    const statuses = snapshots.map((s) => s.status);
    expect(statuses[0]).toBe("WORKING");
    expect(statuses.at(-1)).toBe("READY");
    expect(new Set(statuses).size).toBe(statuses.length);
    expect(statuses).toEqual(
      [
        "WORKING",
        "WAITING_FOR_SANDBOX",
        "PREPARING_REPOSITORY",
        "RUNNING_SETUP_SCRIPT",
        "SETTING_UP_GIT_HOOKS",
        "SETTING_UP_SKILLS",
        "STARTING_CONVERSATION",
        "READY",
      ].filter((s) => statuses.includes(s)),
    );
    expect(new Set(snapshots.map((s) => s.id)).size).toBe(1);
    const id = snapshots.at(-1)!.app_conversation_id!;
    expect((await settle(id, "Hello from the stream")).execution_status).toBe("finished");
  });

  it("messages sent to task-{id} before READY are delivered in order once READY, and answered", async () => {
    const initial = "Initial, with pending ones queued";
    llm.pushFor(initial, { text: "Initial answered." }, { text: "Pending answered." });
    const task = await client.json<StartTask>(
      await api.call("/api/v1/app-conversations", {
        method: "POST",
        key,
        json: { initial_message: { content: text(initial) } },
      }),
    );
    const queued = [];
    for (const t of ["first pending", "second pending", "third pending"]) {
      queued.push(
        await client.json<{ id: string; queued: boolean; position: number }>(
          await api.call(`/api/v1/conversations/task-${task.id}/pending-messages`, {
            method: "POST",
            key,
            json: { content: text(t) },
          }),
          201,
        ),
      );
    }
    // A start takes seconds (a new container): the three are queued before READY.
    expect(queued.map((q) => [q.queued, q.position])).toEqual([
      [true, 1],
      [true, 2],
      [true, 3],
    ]);
    expect(
      (
        await api.call(`/api/v1/conversations/task-${task.id}/pending-messages`, {
          method: "POST",
          key: otherKey,
          json: { content: text("x") },
        })
      ).status,
    ).toBe(404);
    const id = await pollUntilReady(task.id);
    // The initial run may answer the initial message alone first, or all four at once: either way
    // the model ends up asked with the pending ones, and the conversation finishes.
    await waitFor(
      async () =>
        JSON.stringify(llm.requestsFor(initial).at(-1)?.body ?? "").includes("third pending") &&
        (await conversation(id)).execution_status === "finished",
      {
        what: "the pending messages to be answered",
        timeoutMs: 45_000,
        detail: () => api.stack.worker.output().slice(-3000),
      },
    );
    const texts = userTexts(await allEvents(id));
    expect(texts).toEqual([initial, "first pending", "second pending", "third pending"]);
  });

  it("accepts at most 10 queued messages per task (429 beyond); unknown tasks are 404", async () => {
    // A task with no job: it stays WORKING, so every message waits.
    const task = await startTasksRepository(api.database.db).create(userId, {});
    const hex = toHexId(task.id);
    for (let i = 1; i <= 10; i++) {
      const r = await client.json<{ queued: boolean; position: number }>(
        await api.call(`/api/v1/conversations/task-${hex}/pending-messages`, {
          method: "POST",
          key,
          json: { role: "user", content: text(`m${i}`) },
        }),
        201,
      );
      expect(r).toMatchObject({ queued: true, position: i });
    }
    const over = await api.call(`/api/v1/conversations/task-${hex}/pending-messages`, {
      method: "POST",
      key,
      json: { content: text("eleven") },
    });
    expect(over.status).toBe(429);
    expect(over.headers.get("retry-after")).toBeTruthy();
    for (const bad of [`task-${toHexId(newId())}`, "task-zz", toHexId(newId())]) {
      const res = await api.call(`/api/v1/conversations/${bad}/pending-messages`, {
        method: "POST",
        key,
        json: { content: text("x") },
      });
      expect(res.status, bad).toBe(404);
    }
    const invalid = await client.json<{ error: { message: string } }>(
      await api.call(`/api/v1/conversations/task-${hex}/pending-messages`, { method: "POST", key, json: {} }),
      422,
    );
    expect(invalid.error.message).toMatch(/^content:/);
    expect(parseId(hex)).toBe(task.id);
    // Ended, so the janitor's reconciler (it re-enqueues tasks in flight without a job) leaves it be.
    await startTasksRepository(api.database.db).markError(task.id, "test task");
    expect(
      (
        await api.call(`/api/v1/conversations/task-${hex}/pending-messages`, {
          method: "POST",
          key,
          json: { content: text("late") },
        })
      ).status,
    ).toBe(409);
  });
});

describe("pause and resume through the V1 routes", () => {
  it("pause freezes the sandbox (send-message 409), resume continues the same run; a removed sandbox is 410", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let asked: () => void = () => undefined;
    const llmAsked = new Promise<void>((r) => {
      asked = r;
    });
    llm.pushFor(
      "Say it.",
      {
        toolCalls: [{ name: "terminal", arguments: { command: "echo resumed-ok" } }],
        before: async () => {
          asked();
          await held;
        },
      },
      { text: "Done." },
    );
    const { id } = await start({ initial_message: { content: text("Say it.") } });
    const { sandbox_id: sandboxId } = await conversation(id);
    await llmAsked;
    expect(await client.json(await api.call(`/api/v1/sandboxes/${sandboxId}/pause`, { method: "POST", key }))).toEqual({
      success: true,
    });
    expect((await conversation(id)).sandbox_status).toBe("PAUSED");
    const paused = await api.call(`/api/v1/app-conversations/${id}/send-message`, {
      method: "POST",
      key,
      json: { content: text("hello?") },
    });
    expect(paused.status).toBe(409);
    expect(((await paused.json()) as { detail: string }).detail).toContain("resume");
    release();
    expect(await client.json(await api.call(`/api/v1/sandboxes/${sandboxId}/resume`, { method: "POST", key }))).toEqual(
      {
        success: true,
      },
    );
    const done = await waitForTerminal(id);
    expect(done.execution_status).toBe("finished");
    const events = await allEvents(id);
    expect(events.filter((e) => e.kind === "ConversationStateUpdateEvent").map((e) => e.value)).toEqual([
      "running",
      "finished",
    ]);
    expect(JSON.stringify(events.find((e) => e.kind === "ObservationEvent"))).toContain("resumed-ok");

    expect(await client.json(await api.call(`/api/v1/sandboxes/${sandboxId}`, { method: "DELETE", key }))).toEqual({
      success: true,
    });
    const gone = await api.call(`/api/v1/app-conversations/${id}/send-message`, {
      method: "POST",
      key,
      json: { content: text("still there?") },
    });
    expect(gone.status).toBe(410);
  });
});

describe("image blocks reach an Anthropic model too", () => {
  it("a data: URL is sent as a base64 image source, an http(s) URL as a url source", async () => {
    await api.stack.worker.stop();
    await api.stack.startWorker(llm.workerEnv("anthropic"));
    llm.pushFor("Compare them.", { text: "Two pictures." });
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==";
    const { id } = await start({
      initial_message: {
        content: [
          { type: "text", text: "Compare them." },
          { type: "image", image_urls: [`data:image/png;base64,${png}`, "https://images.example.test/b.png"] },
        ],
      },
    });
    await settle(id, "Compare them.");
    const last = llm.requestsFor("Compare them.").at(-1)!;
    expect(last.provider).toBe("anthropic");
    const user = (last.body.messages as { role: string; content: unknown[] }[]).find((m) => m.role === "user");
    expect(user?.content).toEqual([
      { type: "text", text: expect.stringContaining("Compare them.") },
      { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
      // The latest user turn is a prompt-cache breakpoint: its last block carries it.
      {
        type: "image",
        source: { type: "url", url: "https://images.example.test/b.png" },
        cache_control: { type: "ephemeral" },
      },
    ]);
    // The stored event keeps the blocks as OpenHands shapes them.
    const message = (await allEvents(id)).find((e) => e.kind === "MessageEvent" && e.source === "user");
    expect((message?.llm_message as { content: unknown[] } | undefined)?.content).toEqual([
      { type: "text", text: "Compare them." },
      { type: "image", image_urls: [`data:image/png;base64,${png}`, "https://images.example.test/b.png"] },
    ]);
  });
});

describe("the OpenAPI document", () => {
  it("lists every V1 route with its schemas", async () => {
    const doc = await client.json<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>(
      await api.call("/openapi.json"),
    );
    const routes: [string, string][] = [
      ["/api/v1/app-conversations", "post"],
      ["/api/v1/app-conversations", "get"],
      ["/api/v1/app-conversations/search", "get"],
      ["/api/v1/app-conversations/count", "get"],
      ["/api/v1/app-conversations/stream-start", "post"],
      ["/api/v1/app-conversations/{conversation_id}", "patch"],
      ["/api/v1/app-conversations/{conversation_id}", "delete"],
      ["/api/v1/app-conversations/{conversation_id}/send-message", "post"],
      ["/api/v1/app-conversations/{conversation_id}/file", "get"],
      ["/api/v1/app-conversations/{conversation_id}/skills", "get"],
      ["/api/v1/app-conversations/{conversation_id}/hooks", "get"],
      ["/api/v1/app-conversations/{conversation_id}/download", "get"],
      ["/api/v1/app-conversations/start-tasks", "get"],
      ["/api/v1/app-conversations/start-tasks/search", "get"],
      ["/api/v1/app-conversations/start-tasks/count", "get"],
      ["/api/v1/conversation/{conversation_id}/events/search", "get"],
      ["/api/v1/conversation/{conversation_id}/events/count", "get"],
      ["/api/v1/conversation/{conversation_id}/events", "get"],
      ["/api/v1/conversations/{conversation_id}/pending-messages", "post"],
      ["/api/v1/sandboxes/search", "get"],
      ["/api/v1/sandboxes", "get"],
      ["/api/v1/sandboxes", "post"],
      ["/api/v1/sandboxes/{id}/settings/secrets", "get"],
      ["/api/v1/sandboxes/{id}/settings/secrets/{name}", "get"],
      ["/api/v1/sandboxes/{id}/pause", "post"],
      ["/api/v1/sandboxes/{id}/resume", "post"],
      ["/api/v1/sandboxes/{id}", "delete"],
      ["/api/v1/sandbox-specs/search", "get"],
      ["/api/v1/sandbox-specs", "get"],
    ];
    for (const [path, method] of routes) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      const ok = (op?.responses["200"] ?? op?.responses["201"]) as { content?: Record<string, { schema?: unknown }> };
      expect(Object.values(ok?.content ?? {})[0]?.schema, `${method} ${path} schema`).toBeDefined();
    }
  });
});
