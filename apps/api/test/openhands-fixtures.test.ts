import { readFileSync } from "node:fs";
import { toHexId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { createConversationFixture, seedEvents } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";
import { type Models, modelMatcher } from "./openhands-matcher.ts";

/**
 * Our V1 answers against OpenHands' own models, field by field: every field of theirs is in ours,
 * of their type, null only where theirs may be, and within their enum. The models are extracted
 * from OpenHands' sources of a named version (openhands-ai for the app server's responses,
 * openhands-sdk for the events) by fixtures/openhands/extract_models.py, and committed as
 * fixtures/openhands/models.json: not our own reading of them.
 */

interface Fixture {
  sources: Record<string, { repository: string; commit: string; version: string }>;
  models: Models;
}

const fixture = JSON.parse(
  readFileSync(new URL("./fixtures/openhands/models.json", import.meta.url), "utf8"),
) as Fixture;

/**
 * Where we knowingly differ from these versions, each with its reason: a difference not listed here
 * fails, and so does a listed one that a checked answer no longer shows (the list only shrinks).
 * A difference is named by the model that holds the field, wherever that model appears.
 */
/** Our event kinds whose OpenHands model has another name (DESIGN.md names the kind CondensationEvent). */
const MODEL_OF_KIND: Record<string, string> = { CondensationEvent: "Condensation" };

const KNOWN_GAPS: Record<string, string> = {
  // Found by this test: OpenHands echoes the whole request, its defaults filled in; we echo what was sent.
  ...Object.fromEntries(
    [
      "sandbox_id",
      "llm_model",
      "selected_repository",
      "selected_branch",
      "git_provider",
      "trigger",
      "pr_number",
      "parent_conversation_id",
      "agent_type",
    ].map((f) => [`AppConversationStartRequest.${f}: missing`, "echoed only when sent, without OpenHands' default"]),
  ),
  "AppConversationStartRequest.processors: missing": "event callback processors are not supported: dropped",
  // The conversation tree (openhands-sdk's Event.parent_id, on every event): we keep one line of events.
  ...Object.fromEntries(
    [
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "AgentErrorEvent",
      "SystemPromptEvent",
      "ConversationStateUpdateEvent",
      "PauseEvent",
      "Condensation",
      "InterruptEvent",
      "UserRejectObservation",
      "ConversationErrorEvent",
    ].map((k) => [`${k}.parent_id: missing`, "no conversation tree: one line of events"]),
  ),
  // Optional fields of the SDK's ActionEvent that our agent never fills (no reasoning models' blocks,
  // no critic): left out rather than sent as null. (security_risk and summary it fills, for confirmation mode.)
  ...Object.fromEntries(
    ["reasoning_content", "thinking_blocks", "responses_reasoning_item", "critic_result"].map((f) => [
      `ActionEvent.${f}: missing`,
      "optional in openhands-sdk; our agent does not produce it",
    ]),
  ),
  ...Object.fromEntries(
    [
      "MessageEvent.activated_skills",
      "MessageEvent.extended_content",
      "MessageEvent.sender",
      "MessageEvent.critic_result",
      "ObservationEvent.extended_content",
      "AgentErrorEvent.classification",
      "SystemPromptEvent.dynamic_context",
    ].map((f) => [`${f}: missing`, "optional in openhands-sdk; our agent does not produce it"]),
  ),
  // (AgentErrorEvent.tool_name and tool_call_id, required by openhands-sdk, are sent empty for a
  // run's own error: no allowance.)
};

const { differences, fieldDifferences } = modelMatcher(fixture.models);

let api: TestApi;
let key: string;
let conversationId: string;
let taskId: string;
let sandboxId: string;

beforeAll(async () => {
  api = await startTestApi();
  const user = await api.newUser();
  key = user.key;
  const c = await createConversationFixture(api.database.db, { userId: user.userId, title: "fixture" });
  // A conversation as a start leaves it: its sandbox running, events of every kind.
  const sandbox = await sandboxesRepository(api.database.db).upsert({
    name: `tern-test-fixtures-${c.taskId}`,
    image: "tern-sandbox:latest",
    startTaskId: c.taskId,
    conversationId: c.conversationId,
    status: "RUNNING",
  });
  await api.database.db
    .updateTable("conversations")
    // Every optional field filled, so each is checked with a value and not only as null.
    .set({
      sandbox_id: sandbox.id,
      selected_repository: "acme/widgets",
      selected_branch: "main",
      git_provider: "github",
      llm_model: "gpt-test",
      trigger: "openhands_api",
      pr_number: JSON.stringify([7, 12]),
      metrics: JSON.stringify({ accumulated_cost: 0.5, prompt_tokens: 10, completion_tokens: 5 }),
    })
    .where("id", "=", c.conversationId)
    .execute();
  await seedEvents(api.database.db, c.conversationId, 14);
  conversationId = toHexId(c.conversationId);
  // A start task as the API makes it (no worker here: it stays WORKING), its request as the API stored it.
  const started = await api.call("/api/v1/app-conversations", {
    key,
    method: "POST",
    json: { title: "fixture start", initial_message: { content: [{ type: "text", text: "hi" }] } },
  });
  expect(started.status).toBe(200);
  taskId = ((await started.json()) as { id: string }).id;
  sandboxId = toHexId(sandbox.id);
});

afterAll(async () => api?.close());

const get = async (path: string): Promise<unknown> => {
  const res = await api.call(path, { key });
  const text = await res.text();
  expect(res.status, `${path}: ${text.slice(0, 300)}`).toBe(200);
  return JSON.parse(text);
};

describe(`our V1 answers against OpenHands' models (openhands-ai ${fixture.sources["openhands-ai"]?.version}, openhands-sdk ${fixture.sources["openhands-sdk"]?.version})`, () => {
  const found: string[] = [];
  afterAll(() => {
    // Reported, so the list of known gaps can be kept honest.
    if (found.length > 0) console.log(`differences from OpenHands' models:\n  ${found.join("\n  ")}`);
  });

  /** The differences not listed in KNOWN_GAPS, and the gaps of `model` it no longer shows. */
  const unexplained = (model: string, value: unknown): string[] => {
    const diffs = [...new Set(differences(model, value).map((d) => d.replace(/\[\d+\]/g, "[]")))];
    for (const d of diffs) if (!found.includes(d)) found.push(d);
    return [
      ...diffs.filter((d) => !(d in KNOWN_GAPS)),
      ...Object.keys(KNOWN_GAPS)
        .filter((g) => g.startsWith(`${model}.`) && !diffs.includes(g))
        .map((g) => `listed in KNOWN_GAPS, but no longer different: ${g}`),
    ];
  };
  const check = (model: string, value: unknown) => expect(unexplained(model, value), model).toEqual([]);

  it("the checker sees a difference (its positive control)", () => {
    const good = { name: "n", url: "u" };
    expect(differences("ExposedUrl", good)).toEqual([]);
    expect(differences("ExposedUrl", { name: "n" })).toEqual(["ExposedUrl.url: missing"]);
    expect(differences("ExposedUrl", { name: null, url: 1 })).toEqual([
      "ExposedUrl.name: null, but OpenHands' str is not nullable",
      "ExposedUrl.url: integer, not str",
    ]);
    const task = fixture.models.AppConversationStartTask!.fields;
    expect(fieldDifferences(task.status!, "SOMETHING_ELSE", "status")[0]).toMatch(/is not one of/);
  });

  it("AppConversation, by id and in a search page", async () => {
    const [conversation] = (await get(`/api/v1/app-conversations?ids=${conversationId}`)) as unknown[];
    check("AppConversation", conversation);
    check("AppConversationPage", await get("/api/v1/app-conversations/search"));
  });

  it("AppConversationStartTask, by id and in a search page", async () => {
    const [task] = (await get(`/api/v1/app-conversations/start-tasks?ids=${taskId}`)) as unknown[];
    check("AppConversationStartTask", task);
    // The newest: the task the API made (the conversation's own was written by the fixture).
    check("AppConversationStartTaskPage", await get("/api/v1/app-conversations/start-tasks/search?limit=1"));
  });

  it("SandboxInfo and SandboxSpecInfo, by id and in search pages", async () => {
    const [sandbox] = (await get(`/api/v1/sandboxes?id=${sandboxId}`)) as unknown[];
    check("SandboxInfo", sandbox);
    check("SandboxPage", await get("/api/v1/sandboxes/search"));
    check("SandboxSpecInfoPage", await get("/api/v1/sandbox-specs/search"));
  });

  it("every event kind, as the events search answers it", async () => {
    const page = (await get(`/api/v1/conversation/${conversationId}/events/search?limit=100`)) as {
      items: { kind: string }[];
    };
    const kinds = [...new Set(page.items.map((e) => e.kind))].sort();
    expect(kinds).toEqual(
      [
        "ActionEvent",
        "AgentErrorEvent",
        "CondensationEvent",
        "ConversationErrorEvent",
        "ConversationStateUpdateEvent",
        "InterruptEvent",
        "MessageEvent",
        "ObservationEvent",
        "PauseEvent",
        "SystemPromptEvent",
        "UserRejectObservation",
      ].sort(),
    );
    expect(page.items.flatMap((event) => unexplained(MODEL_OF_KIND[event.kind] ?? event.kind, event))).toEqual([]);
  });
});
