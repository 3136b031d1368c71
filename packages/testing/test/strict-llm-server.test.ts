import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ScriptedLlmServer, startLlmServer } from "../src/llm-server.ts";

let llm: ScriptedLlmServer;
beforeAll(async () => {
  llm = await startLlmServer();
});
afterAll(() => llm.close());
beforeEach(() => llm.clear());

type Json = Record<string, unknown>;

const post = async (provider: "openai" | "anthropic", body: Json) => {
  const res = await fetch(`${llm.url}${provider === "openai" ? "/v1/chat/completions" : "/v1/messages"}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const json = (res.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : { text }) as Json;
  return { status: res.status, headers: res.headers, json };
};

/** OpenAI's refusal: a 400 with its error body, `message` matching. */
const openaiRefuses = async (body: Json, message: RegExp, param?: string | null) => {
  llm.clear();
  llm.push({ text: "never sent" });
  const { status, json } = await post("openai", body);
  expect(status).toBe(400);
  expect(json).toEqual({
    error: expect.objectContaining({ message: expect.stringMatching(message), type: "invalid_request_error" }),
  });
  expect(Object.keys(json.error as Json).sort()).toEqual(["code", "message", "param", "type"]);
  if (param !== undefined) expect((json.error as Json).param).toBe(param);
  // The refusal took no scripted reply and is recorded with its reason.
  expect(llm.remaining()).toBe(1);
  expect(llm.requests.at(-1)?.violation).toMatch(message);
};

const openaiTakes = async (body: Json) => {
  llm.push({ text: "ok" });
  const { status, json } = await post("openai", body);
  expect({ status, json: status === 200 ? null : json }).toEqual({ status: 200, json: null });
};

const anthropicRefuses = async (body: Json, message: RegExp) => {
  llm.clear();
  llm.push({ text: "never sent" });
  const { status, json } = await post("anthropic", body);
  expect(status).toBe(400);
  expect(json).toEqual({
    type: "error",
    error: { type: "invalid_request_error", message: expect.stringMatching(message) },
  });
  expect(llm.remaining()).toBe(1);
};

const anthropicTakes = async (body: Json, reply: Parameters<ScriptedLlmServer["push"]>[0] = { text: "ok" }) => {
  llm.push(reply);
  const { status, json } = await post("anthropic", body);
  expect({ status, json: status === 200 ? null : json }).toEqual({ status: 200, json: null });
  return json as { content: Json[]; stop_reason: string };
};

const fn = { type: "function", function: { name: "bash", description: "runs", parameters: { type: "object" } } };
const call = (id: string) => ({ id, type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } });
const PNG = "data:image/png;base64,iVBORw0KGgo=";

/** A tool turn as the agent sends it to OpenAI: system, user, the call, its result. */
const openaiTurn = (): Json => ({
  model: "gpt-test",
  stream: false,
  messages: [
    { role: "system", content: "You are an agent." },
    { role: "user", content: "list the files" },
    { role: "assistant", content: null, tool_calls: [call("call_1")] },
    { role: "tool", tool_call_id: "call_1", content: "a.txt" },
  ],
  tools: [fn],
});

describe("strict OpenAI chat completions (openai-openapi's schema and the documented rules)", () => {
  it("takes a well-formed tool turn, with an image in a user message after the tool messages", async () => {
    const body = openaiTurn();
    (body.messages as Json[]).push({
      role: "user",
      content: [
        { type: "text", text: "The tool returned this image:" },
        { type: "image_url", image_url: { url: PNG } },
      ],
    });
    await openaiTakes({ ...body, stream: true, stream_options: { include_usage: true }, prompt_cache_key: "c1" });
  });

  it("refuses what the schema refuses, with OpenAI's error body", async () => {
    const { messages: _, ...noMessages } = openaiTurn();
    await openaiRefuses(noMessages, /^Missing required parameter: 'messages'\.$/, "messages");
    await openaiRefuses({ ...openaiTurn(), messages: [] }, /empty array/, "messages");
    const noCallId = openaiTurn();
    delete (noCallId.messages as Json[])[3]?.tool_call_id;
    await openaiRefuses(noCallId, /Missing required parameter: 'messages\[3\]\.tool_call_id'/);
    const badRole = openaiTurn();
    (badRole.messages as Json[])[1] = { role: "robot", content: "hi" };
    await openaiRefuses(badRole, /Invalid value: 'robot'/, "messages[1].role");
    await openaiRefuses({ ...openaiTurn(), temperature: 3 }, /Expected a value <= 2/, "temperature");
  });

  it("refuses a parameter it does not know, at the top and within", async () => {
    await openaiRefuses(
      { ...openaiTurn(), max_output_tokens: 10 },
      /^Unrecognized request argument supplied: max_output_tokens$/,
    );
    const inner = openaiTurn();
    (inner.messages as Json[])[1] = { role: "user", content: "hi", images: [PNG] };
    await openaiRefuses(inner, /Unknown parameter: 'messages\[1\]\.images'/);
  });

  it("refuses an image part in a tool message (tool messages carry text only)", async () => {
    const body = openaiTurn();
    (body.messages as Json[])[3] = {
      role: "tool",
      tool_call_id: "call_1",
      content: [{ type: "image_url", image_url: { url: PNG } }],
    };
    await openaiRefuses(
      body,
      /^Invalid value: 'image_url'\. Supported values are: 'text'\.$/,
      "messages[3].content[0].type",
    );
  });

  it("refuses a call whose tool message does not follow it at once", async () => {
    const between = openaiTurn();
    (between.messages as Json[]).splice(3, 0, { role: "user", content: "and quickly" });
    await openaiRefuses(
      between,
      /must be followed by tool messages responding to each 'tool_call_id'.*call_1/,
      "messages.[2].role",
    );
    const missing = openaiTurn();
    (missing.messages as Json[]).pop();
    await openaiRefuses(missing, /did not have response messages: call_1/);
  });

  it("refuses a tool message that answers no call just before it", async () => {
    const stray = openaiTurn();
    (stray.messages as Json[]).push({ role: "tool", tool_call_id: "call_9", content: "late" });
    await openaiRefuses(
      stray,
      /messages with role 'tool' must be a response to a preceeding message with 'tool_calls'/,
      "messages.[4].role",
    );
  });

  it("refuses temperature and max_tokens for reasoning models, and takes max_completion_tokens with reasoning_effort", async () => {
    for (const model of ["o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5.1-codex"]) {
      await openaiRefuses(
        { ...openaiTurn(), model, temperature: 0.2 },
        /'temperature' is not supported with this model/,
        "temperature",
      );
      await openaiRefuses(
        { ...openaiTurn(), model, max_tokens: 1000 },
        /Use 'max_completion_tokens' instead/,
        "max_tokens",
      );
      await openaiTakes({ ...openaiTurn(), model, max_completion_tokens: 1000, reasoning_effort: "high" });
    }
    await openaiRefuses(
      { ...openaiTurn(), model: "gpt-4o", reasoning_effort: "high" },
      /'reasoning_effort' is not supported/,
    );
    await openaiTakes({ ...openaiTurn(), model: "gpt-4o", temperature: 0.2, max_tokens: 1000 });
  });

  it("refuses a function name outside a-z, A-Z, 0-9, _ and -", async () => {
    const body = { ...openaiTurn(), tools: [{ type: "function", function: { name: "run shell", parameters: {} } }] };
    await openaiRefuses(body, /string does not match pattern/, "tools[0].function.name");
  });
});

/** A tool turn as the agent sends it to Anthropic. */
const anthropicTurn = (): Json => ({
  model: "claude-test",
  max_tokens: 4096,
  system: [{ type: "text", text: "You are an agent.", cache_control: { type: "ephemeral" } }],
  messages: [
    { role: "user", content: [{ type: "text", text: "list the files" }] },
    {
      role: "assistant",
      content: [
        { type: "text", text: "Listing." },
        { type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_1", content: "a.txt", is_error: false },
        { type: "text", text: "and the image:" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      ],
    },
  ],
  tools: [{ name: "bash", description: "runs", input_schema: { type: "object", properties: {} } }],
});

const messagesOf = (body: Json) => body.messages as { role: string; content: Json[] }[];

describe("strict Anthropic messages (the SDK's types, the API reference and the documented rules)", () => {
  it("takes a well-formed tool turn", async () => {
    await anthropicTakes({ ...anthropicTurn(), stream: true });
  });

  it("refuses missing fields, unknown blocks and unknown fields, with Anthropic's error body", async () => {
    const { max_tokens: _, ...noMax } = anthropicTurn();
    await anthropicRefuses(noMax, /^max_tokens: Field required$/);
    const unknownBlock = anthropicTurn();
    messagesOf(unknownBlock)[0]!.content[0] = { type: "markdown", text: "hi" };
    await anthropicRefuses(unknownBlock, /^messages\.0\.content\.0: Input tag 'markdown' found using 'type'/);
    const extra = anthropicTurn();
    messagesOf(extra)[0]!.content[0] = { type: "text", text: "hi", images: [] };
    await anthropicRefuses(extra, /^messages\.0\.content\.0\.images: Extra inputs are not permitted$/);
    const noId = anthropicTurn();
    delete messagesOf(noId)[1]!.content[1]!.id;
    await anthropicRefuses(noId, /^messages\.1\.content\.1\.id: Field required$/);
    await anthropicRefuses({ ...anthropicTurn(), stop: "x" }, /^stop: Extra inputs are not permitted$/);
  });

  it("refuses empty text blocks and empty messages", async () => {
    const empty = anthropicTurn();
    messagesOf(empty)[0]!.content[0] = { type: "text", text: "" };
    await anthropicRefuses(empty, /text content blocks must contain non-whitespace text/);
    const none = anthropicTurn();
    messagesOf(none)[0]!.content = [];
    await anthropicRefuses(none, /^messages\.0: all messages must have non-empty content/);
  });

  it("refuses a tool_use whose tool_result is not in the very next message", async () => {
    const body = anthropicTurn();
    messagesOf(body).splice(2, 0, { role: "assistant", content: [{ type: "text", text: "wait" }] });
    await anthropicRefuses(body, /`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1/);
    const unanswered = anthropicTurn();
    messagesOf(unanswered).pop();
    await anthropicRefuses(
      unanswered,
      /`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1/,
    );
  });

  it("refuses a tool_result after other blocks of its message, or for no tool_use just before", async () => {
    const late = anthropicTurn();
    messagesOf(late)[2]!.content.reverse();
    await anthropicRefuses(late, /^messages\.2\.content\.2: `tool_result` blocks must come first/);
    // A user message of its own before the results is not "the next message" after the call.
    const split = anthropicTurn();
    messagesOf(split).splice(2, 0, { role: "user", content: [{ type: "text", text: "also" }] });
    await anthropicRefuses(
      split,
      /^messages\.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1/,
    );
    const stray = anthropicTurn();
    messagesOf(stray)[2]!.content.unshift({ type: "tool_result", tool_use_id: "toolu_9", content: "?" });
    await anthropicRefuses(
      stray,
      /^messages\.2\.content\.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9/,
    );
  });

  it("refuses a fifth cache_control breakpoint", async () => {
    const four = anthropicTurn();
    const [first, , last] = messagesOf(four);
    first!.content[0]!.cache_control = { type: "ephemeral" };
    last!.content[0]!.cache_control = { type: "ephemeral" };
    last!.content[1]!.cache_control = { type: "ephemeral" };
    await anthropicTakes(four);
    const five = structuredClone(four);
    (five.tools as Json[])[0]!.cache_control = { type: "ephemeral" };
    await anthropicRefuses(five, /^A maximum of 4 blocks with cache_control may be provided\. Found 5\.$/);
  });

  it("refuses budget_tokens under 1024 or not below max_tokens", async () => {
    const turn = { ...anthropicTurn(), messages: [messagesOf(anthropicTurn())[0]] };
    await anthropicRefuses(
      { ...turn, thinking: { type: "enabled", budget_tokens: 1000 } },
      /^thinking\.budget_tokens: Input should be greater than or equal to 1024$/,
    );
    await anthropicRefuses(
      { ...turn, max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 2048 } },
      /`max_tokens` must be greater than `thinking.budget_tokens`/,
    );
    await anthropicRefuses(
      { ...turn, temperature: 0.5, thinking: { type: "enabled", budget_tokens: 1024 } },
      /`temperature` may only be set to 1/,
    );
    await anthropicTakes({ ...turn, max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 2047 } });
  });

  it("refuses thinking blocks that do not come back as they were sent", async () => {
    const thinking = { type: "enabled", budget_tokens: 1024 };
    const ask = { ...anthropicTurn(), thinking, messages: [messagesOf(anthropicTurn())[0]] };
    const reply = await anthropicTakes(ask, {
      thinking: [{ thinking: "First I list." }, { redacted: "EncryptedBlob==" }],
      toolCalls: [{ id: "toolu_1", name: "bash", arguments: { command: "ls" } }],
    });
    expect(reply.content.map((b) => b.type)).toEqual(["thinking", "redacted_thinking", "tool_use"]);
    expect(reply.content[0]).toMatchObject({ thinking: "First I list.", signature: expect.any(String) });
    const next = (assistant: Json[]): Json => ({
      ...ask,
      messages: [
        messagesOf(ask)[0],
        { role: "assistant", content: assistant },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a.txt" }] },
      ],
    });
    await anthropicTakes(next(reply.content));
    const changed = structuredClone(reply.content);
    changed[0]!.thinking = "First I list, quietly.";
    await anthropicRefuses(next(changed), /^messages\.1\.content\.0: Invalid `signature` in `thinking` block$/);
    const forged = structuredClone(reply.content);
    forged[0]!.signature = "c2lnbmVk";
    await anthropicRefuses(next(forged), /Invalid `signature` in `thinking` block/);
    const redacted = structuredClone(reply.content);
    redacted[1]!.data = "Other==";
    await anthropicRefuses(next(redacted), /^messages\.1\.content\.1: Invalid `data` in `redacted_thinking` block$/);
    const reordered = [reply.content[1]!, reply.content[0]!, reply.content[2]!];
    await anthropicRefuses(next(reordered), /original order/);
    // Within its tool turn, the assistant message must keep its thinking first.
    await anthropicRefuses(next([reply.content[2]!]), /a final `assistant` message must start with a thinking block/);
  });

  it("thinks whenever a request turns thinking on, as Claude does", async () => {
    const ask = {
      ...anthropicTurn(),
      thinking: { type: "enabled", budget_tokens: 1024 },
      messages: [messagesOf(anthropicTurn())[0]],
    };
    const reply = await anthropicTakes(ask, { text: "done" });
    expect(reply.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    const plain = await anthropicTakes({ ...ask, thinking: undefined }, { text: "done" });
    expect(plain.content.map((b) => b.type)).toEqual(["text"]);
  });
});

describe("scripted answers beyond a reply", () => {
  it("sends a rate limit with Retry-After, and Anthropic's overload, in each provider's body", async () => {
    llm.push({ error: { status: 429, message: "slow down", retryAfter: 2 } });
    const limited = await post("openai", openaiTurn());
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("2");
    expect(limited.json).toEqual({
      error: { message: "slow down", type: "requests", param: null, code: "rate_limit_exceeded" },
    });
    llm.push({ error: { status: 529, message: "Overloaded", headers: { "retry-after-ms": "50" } } });
    const overloaded = await post("anthropic", anthropicTurn());
    expect(overloaded.status).toBe(529);
    expect(overloaded.headers.get("retry-after-ms")).toBe("50");
    expect(overloaded.json).toEqual({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } });
  });

  it("says a reply was cut by its length", async () => {
    llm.push({ text: "partial", truncated: true });
    const openai = await post("openai", openaiTurn());
    expect((openai.json.choices as Json[])[0]?.finish_reason).toBe("length");
    llm.push({ toolCalls: [{ name: "bash", arguments: '{"command":"ec' }], truncated: true });
    const anthropic = await post("anthropic", anthropicTurn());
    expect(anthropic.json.stop_reason).toBe("max_tokens");
  });

  it("checks nothing when strictness is off", async () => {
    llm.setStrict(false);
    try {
      await openaiTakes({ ...openaiTurn(), model: "o3", temperature: 0.1 });
    } finally {
      llm.setStrict(true);
    }
  });
});
