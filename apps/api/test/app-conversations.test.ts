import { toHexId } from "@tern/core";
import { createConversationFixture } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => api?.close());

type Json = Record<string, unknown>;
const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;
const minimal = { title: "Fix the README", initial_message: { role: "user", content: [{ type: "text", text: "hi" }] } };
const start = (key: string, body: unknown) =>
  api.call("/api/v1/app-conversations", { key, method: "POST", json: body });

describe("POST /api/v1/app-conversations", () => {
  it("writes a WORKING start task and enqueues its start job under the task id", async () => {
    const { key, userId } = await api.newUser();
    const body = {
      ...minimal,
      initial_message: { ...minimal.initial_message, run: true },
      llm_model: "gpt-4o",
      selected_repository: "octocat/hello-world",
      selected_branch: "feature/x-1.2",
      git_provider: "github",
    };
    const res = await start(key, body);
    expect(res.status).toBe(200);
    const task = (await res.json()) as Json;
    expect(Object.keys(task).sort()).toEqual(
      [
        "agent_server_url",
        "app_conversation_id",
        "created_at",
        "created_by_user_id",
        "detail",
        "id",
        "request",
        "sandbox_id",
        "status",
        "updated_at",
      ].sort(),
    );
    expect(task).toMatchObject({
      status: "WORKING",
      detail: null,
      app_conversation_id: null,
      created_by_user_id: toHexId(userId),
      request: body,
    });
    expect(task.id).toMatch(/^[0-9a-f]{32}$/);
    expect(task.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    const row = await api.database.db
      .selectFrom("start_tasks")
      .selectAll()
      .where("id", "=", String(task.id).replace(/^(.{8})(.{4})(.{4})(.{4})/, "$1-$2-$3-$4-"))
      .executeTakeFirst();
    expect(row?.status).toBe("WORKING");
    expect(row?.user_id).toBe(userId);
    const job = await api.queues.start.getJob(row?.id ?? "");
    expect(job?.name).toBe("conversation.start");
    expect(job?.data).toEqual({ taskId: row?.id });
  });

  it("rolls the task back (503) when adding the job fails, so no task waits without a job", async () => {
    const { key, userId } = await api.newUser();
    const original = api.queues.start.add.bind(api.queues.start);
    api.queues.start.add = () => Promise.reject(new Error("READONLY You can't write against a read only replica."));
    try {
      const res = await start(key, minimal);
      expect(res.status).toBe(503);
      expect((await errorOf(res)).code).toBe("service_unavailable");
    } finally {
      api.queues.start.add = original;
    }
    const rows = await api.database.db.selectFrom("start_tasks").select("id").where("user_id", "=", userId).execute();
    expect(rows).toEqual([]);
    expect((await start(key, minimal)).status).toBe(200);
  });

  it("accepts the minimal request (title and initial_message) and an empty one", async () => {
    const { key } = await api.newUser();
    expect((await start(key, minimal)).status).toBe(200);
    expect((await start(key, {})).status).toBe(200);
  });

  it("refuses each bad field with 422 naming it, and writes nothing", async () => {
    const { key, userId } = await api.newUser();
    const cases: [string, unknown][] = [
      ["title", { title: "x".repeat(501) }],
      ["title", { title: 5 }],
      ["initial_message.role", { initial_message: { role: "assistant", content: [{ type: "text", text: "x" }] } }],
      ["initial_message.content", { initial_message: { role: "user", content: [] } }],
      ["initial_message.content", { initial_message: { role: "user", content: "hi" } }],
      [
        "initial_message.content.0.image_urls",
        { initial_message: { role: "user", content: [{ type: "image", text: "x" }] } },
      ],
      ["initial_message.content.0.text", { initial_message: { role: "user", content: [{ type: "text" }] } }],
      [
        "initial_message.run",
        { initial_message: { role: "user", content: [{ type: "text", text: "x" }], run: "yes" } },
      ],
      ["llm_model", { llm_model: "" }],
      ["git_provider", { git_provider: "sourceforge" }],
    ];
    for (const repo of ["octocat", "a/b/c", "../etc", "a/..", "-x/y", "https://github.com/a/b", "a/b c", "/a"]) {
      cases.push(["selected_repository", { selected_repository: repo }]);
    }
    for (const branch of [
      "",
      "a..b",
      "-rf",
      "a b",
      "a~1",
      "a^",
      "a:b",
      "a?",
      "a*",
      "a[b",
      "a\\b",
      "a@{1}",
      "x.lock",
      "x/",
      "x.",
      "/x",
      "a//b",
      ".hidden",
      "a/.b",
      "@",
      "a\u0001b",
    ]) {
      cases.push(["selected_branch", { selected_branch: branch }]);
    }
    for (const [field, body] of cases) {
      const res = await start(key, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      const error = await errorOf(res);
      expect(error.code).toBe("validation_failed");
      expect(error.message.startsWith(`${field}: `), `${JSON.stringify(body)} → ${error.message}`).toBe(true);
    }
    const rows = await api.database.db.selectFrom("start_tasks").select("id").where("user_id", "=", userId).execute();
    expect(rows).toHaveLength(0);
  });

  it("accepts valid repository and branch names", async () => {
    const { key } = await api.newUser();
    for (const [repo, branch] of [
      ["All-Hands-AI/OpenHands", "main"],
      ["a/b.js", "release/v1.2.3"],
      ["user_1/repo-2", "feat/ünïcode"],
      ["x/.github", "HEAD-1"],
    ]) {
      const res = await start(key, { selected_repository: repo, selected_branch: branch });
      expect(res.status, `${repo} ${branch}`).toBe(200);
    }
  });

  it("accepts a GitLab nested group (group/sub/repo) and refuses it for GitHub, as the worker does", async () => {
    const { key } = await api.newUser();
    const nested = { selected_repository: "group/sub/repo", selected_branch: "main" };
    const gitlab = await start(key, { ...nested, git_provider: "gitlab" });
    expect(gitlab.status).toBe(200);
    expect(((await gitlab.json()) as Json).request).toEqual({ ...nested, git_provider: "gitlab" });
    for (const body of [nested, { ...nested, git_provider: "github" }, { ...nested, git_provider: "bitbucket" }]) {
      const res = await start(key, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect((await errorOf(res)).message).toBe("selected_repository: must be of the form owner/repo");
    }
  });
});

describe("start tasks: batch lookup and listing", () => {
  it("returns tasks in the order asked, null for unknown, malformed and other users' ids", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const a1 = (await (await start(alice.key, minimal)).json()) as Json;
    const a2 = (await (await start(alice.key, { title: "two" })).json()) as Json;
    const b1 = (await (await start(bob.key, minimal)).json()) as Json;
    const hyphenated = String(a1.id).replace(/^(.{8})(.{4})(.{4})(.{4})/, "$1-$2-$3-$4-");
    const q = [a2.id, "nope", b1.id, hyphenated, "0".repeat(32)].map((id) => `ids=${id}`).join("&");
    const res = await api.call(`/api/v1/app-conversations/start-tasks?${q}`, { key: alice.key });
    expect(res.status).toBe(200);
    const list = (await res.json()) as (Json | null)[];
    expect(list.map((t) => t?.id ?? null)).toEqual([a2.id, null, null, a1.id, null]);
    expect(list[0]).toEqual(a2);
    const single = await api.call(`/api/v1/app-conversations/start-tasks?ids=${a1.id}`, { key: alice.key });
    expect(((await single.json()) as Json[])[0]?.id).toBe(a1.id);
  });

  it("wants between 1 and 100 ids", async () => {
    const { key } = await api.newUser();
    const none = await api.call("/api/v1/app-conversations/start-tasks", { key });
    expect(none.status).toBe(422);
    expect((await errorOf(none)).message).toMatch(/^ids: /);
    const ids = (n: number) => Array.from({ length: n }, () => `ids=${"a".repeat(32)}`).join("&");
    expect((await api.call(`/api/v1/app-conversations/start-tasks?${ids(100)}`, { key })).status).toBe(200);
    const tooMany = await api.call(`/api/v1/app-conversations/start-tasks?${ids(101)}`, { key });
    expect(tooMany.status).toBe(422);
    expect((await errorOf(tooMany)).message).toMatch(/^ids: /);
    expect((await api.call(`/api/v1/app-conversations?${ids(101)}`, { key })).status).toBe(422);
  });

  it("lists the caller's tasks newest first, paged by a cursor, and nobody else's", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const made: string[] = [];
    for (let i = 0; i < 7; i++)
      made.push(String(((await (await start(alice.key, { title: `t${i}` })).json()) as Json).id));
    await start(bob.key, minimal);
    const seen: string[] = [];
    let pageId: string | null = null;
    let pages = 0;
    do {
      const qs: string = pageId ? `limit=3&page_id=${encodeURIComponent(pageId)}` : "limit=3";
      const res = await api.call(`/api/v1/app-conversations/start-tasks/search?${qs}`, { key: alice.key });
      expect(res.status).toBe(200);
      const page = (await res.json()) as { items: Json[]; next_page_id: string | null };
      seen.push(...page.items.map((t) => String(t.id)));
      pageId = page.next_page_id;
      pages++;
    } while (pageId);
    expect(pages).toBe(3);
    expect(seen).toEqual([...made].reverse());
    const bobsView = await api.call("/api/v1/app-conversations/start-tasks/search", { key: bob.key });
    expect(((await bobsView.json()) as { items: Json[] }).items).toHaveLength(1);
    expect((await api.call("/api/v1/app-conversations/start-tasks/search?limit=101", { key: alice.key })).status).toBe(
      422,
    );
    expect(
      (await api.call("/api/v1/app-conversations/start-tasks/search?page_id=forged", { key: alice.key })).status,
    ).toBe(400);
  });
});

describe("conversations: batch lookup and listing", () => {
  it("returns the conversation record in the order asked, null for unknown and foreign ids", async () => {
    const alice = await api.newUser();
    const bob = await api.newUser();
    const one = await createConversationFixture(api.database.db, { userId: alice.userId, title: "one" });
    const two = await createConversationFixture(api.database.db, { userId: alice.userId, title: "two" });
    const bobs = await createConversationFixture(api.database.db, { userId: bob.userId });
    const q = [two.conversationId, bobs.conversationId, "zzz", toHexId(one.conversationId)]
      .map((id) => `ids=${id}`)
      .join("&");
    const res = await api.call(`/api/v1/app-conversations?${q}`, { key: alice.key });
    expect(res.status).toBe(200);
    const list = (await res.json()) as (Json | null)[];
    expect(list.map((c) => c?.title ?? null)).toEqual(["two", null, null, "one"]);
    const record = list[3] as Json;
    expect(Object.keys(record).sort()).toEqual(
      [
        "agent_server_url",
        "conversation_url",
        "created_at",
        "created_by_user_id",
        "execution_status",
        "git_provider",
        "id",
        "llm_model",
        "metrics",
        "sandbox_id",
        "sandbox_status",
        "selected_branch",
        "selected_repository",
        "session_api_key",
        "title",
        "updated_at",
        "trigger",
        "pr_number",
        "parent_conversation_id",
        "sub_conversation_ids",
        "public",
        "agent_type",
      ].sort(),
    );
    expect(record).toMatchObject({
      id: toHexId(one.conversationId),
      created_by_user_id: toHexId(alice.userId),
      sandbox_status: "MISSING",
      execution_status: "idle",
      conversation_url: `http://api.test/conversations/${toHexId(one.conversationId)}`,
      // No sandbox yet: no agent server.
      agent_server_url: null,
      session_api_key: one.sessionApiKey,
      metrics: {
        model_name: "default",
        accumulated_cost: 0,
        max_budget_per_task: null,
        accumulated_token_usage: { model: "default", prompt_tokens: 0, completion_tokens: 0 },
        llm_calls: 0,
      },
    });
  });

  it("lists the caller's conversations newest first, paged", async () => {
    const carol = await api.newUser();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(toHexId((await createConversationFixture(api.database.db, { userId: carol.userId })).conversationId));
    }
    const first = (await (await api.call("/api/v1/app-conversations/search?limit=4", { key: carol.key })).json()) as {
      items: Json[];
      next_page_id: string | null;
    };
    expect(first.items.map((c) => c.id)).toEqual([...ids].reverse().slice(0, 4));
    expect(first.next_page_id).toBeTruthy();
    const second = (await (
      await api.call(`/api/v1/app-conversations/search?limit=4&page_id=${first.next_page_id}`, { key: carol.key })
    ).json()) as { items: Json[]; next_page_id: string | null };
    expect(second.items.map((c) => c.id)).toEqual([ids[0]]);
    expect(second.next_page_id).toBeNull();
    // Another user's cursor is not valid for this user.
    const dave = await api.newUser();
    expect(
      (await api.call(`/api/v1/app-conversations/search?page_id=${first.next_page_id}`, { key: dave.key })).status,
    ).toBe(400);
  });
});

describe("X-Session-API-Key", () => {
  it("reads its own conversation and its events, and nothing else", async () => {
    const owner = await api.newUser();
    const mine = await createConversationFixture(api.database.db, { userId: owner.userId });
    const sibling = await createConversationFixture(api.database.db, { userId: owner.userId });
    const headers = { "x-session-api-key": mine.sessionApiKey };
    const hex = toHexId(mine.conversationId);

    const own = await api.call(`/api/v1/app-conversations?ids=${hex}&ids=${sibling.conversationId}`, { headers });
    expect(own.status).toBe(200);
    expect(((await own.json()) as (Json | null)[]).map((c) => c?.id ?? null)).toEqual([hex, null]);
    expect((await api.call(`/api/v1/conversation/${hex}/events/search`, { headers })).status).toBe(200);
    expect((await api.call(`/api/v1/conversation/${hex}/events/count`, { headers })).status).toBe(200);
    expect((await api.call(`/api/v1/conversation/${sibling.conversationId}/events/search`, { headers })).status).toBe(
      404,
    );

    for (const [method, path] of [
      ["GET", "/api/keys"],
      ["POST", "/api/keys"],
      ["POST", "/api/v1/app-conversations"],
      ["GET", "/api/v1/app-conversations/search"],
      ["GET", `/api/v1/app-conversations/start-tasks?ids=${mine.taskId}`],
      ["POST", `/api/v1/conversation/${hex}/events`],
      ["DELETE", `/api/v1/app-conversations/${hex}`],
    ] as const) {
      const res = await api.call(path, { headers, method, ...(method === "POST" ? { json: {} } : {}) });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect((await api.call("/api/keys", { headers: { "x-session-api-key": "sess_unknown" } })).status).toBe(401);
    expect(
      (await api.call(`/api/v1/app-conversations?ids=${hex}`, { headers: { "x-session-api-key": "nope" } })).status,
    ).toBe(401);
  });
});
