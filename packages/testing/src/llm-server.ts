import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { anthropicViolation, newThinkingMemory, type ThinkingMemory } from "./strict/anthropic-rules.ts";
import { openAiViolation } from "./strict/openai-rules.ts";

/** One scripted answer of the server, given to the next request in order. */
export type ScriptedReply =
  | {
      text?: string;
      /** `arguments` as a string is sent verbatim (so it may be malformed JSON). */
      toolCalls?: { name: string; arguments: string | Record<string, unknown>; id?: string }[];
      /**
       * `cacheRead`/`cacheWrite`: the cached prompt tokens the provider reports (Anthropic: beside `input`;
       * OpenAI: within it). `reasoning`: OpenAI's reasoning tokens (within `output`).
       */
      usage?: { input: number; output: number; cacheRead?: number; cacheWrite?: number; reasoning?: number };
      /**
       * Anthropic thinking blocks, sent before the text (the server signs each and refuses any later
       * request that changes one). Without it, a request with thinking on gets one made up, as Claude
       * always thinks then; `[]` sends none.
       */
      thinking?: ({ thinking: string } | { redacted: string })[];
      /** The reply was cut by the length limit: Anthropic's `stop_reason: "max_tokens"`, OpenAI's `finish_reason: "length"`. */
      truncated?: boolean;
      /** The reply waits for this before it is sent (to hold an LLM call in flight). */
      before?: () => Promise<void>;
    }
  | {
      /**
       * An error answer with the provider's body (429: a rate limit; 529: Anthropic's overload).
       * `retryAfter`: the Retry-After header's value (seconds); `headers`: any others (`retry-after-ms`).
       */
      error: { status: number; message?: string; retryAfter?: number | string; headers?: Record<string, string> };
    };

export interface RecordedRequest {
  provider: "openai" | "anthropic";
  stream: boolean;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  /** The request's size as the server counts it against its context limit (contextLimitTokens). */
  tokens: number;
  /** Refused with the provider's context-length error (over the limit of setContextLimit). */
  refusedForLength: boolean;
  /** Refused for breaking one of the provider's rules (the strict check): the error message it was sent. */
  violation: string | null;
}

export interface LlmServerOptions {
  /**
   * Checks every request against its provider's published rules and answers a breach as the provider
   * would (400, its error body) without taking a scripted reply (default: on). See src/strict/.
   */
  strict?: boolean;
}

export interface ScriptedLlmServer {
  url: string;
  /** For the OpenAI SDK (`baseURL` includes /v1). */
  openaiBaseUrl: string;
  /** For the Anthropic SDK (it adds /v1 itself). */
  anthropicBaseUrl: string;
  /** Appends replies to the shared script, taken in arrival order by any request no key matches. */
  push: (...replies: ScriptedReply[]) => void;
  /** Every request received, in order (failed ones too). */
  requests: RecordedRequest[];
  /** Replies not yet used. */
  remaining: () => number;
  /** Drops the replies not yet used. */
  clear: () => void;
  /**
   * Keyed mode: replies for one conversation, whatever other conversations ask meanwhile and in
   * whatever order. A request whose first user message contains `key` takes the next of these;
   * a request that matches no key takes from the shared script (`push`).
   */
  pushFor: (key: string, ...replies: ScriptedReply[]) => void;
  /** Keyed replies for `key` not yet used. */
  remainingFor: (key: string) => number;
  /** The requests whose first user message contains `key`, in order. */
  requestsFor: (key: string) => RecordedRequest[];
  /**
   * Refuses every request longer than `tokens` (null: no limit) with the provider's context-length
   * error (OpenAI's 400 `context_length_exceeded`, Anthropic's 400 "prompt is too long"), using no
   * scripted reply. A request's tokens are its system prompt, messages and tools as JSON, one per
   * four bytes (contextLimitTokens).
   */
  setContextLimit: (tokens: number | null) => void;
  /** Answers requests when the script is empty (null: none; the server then answers with an error). */
  setResponder: (responder: ((request: RecordedRequest) => ScriptedReply) | null) => void;
  /** Turns the strict check of requests on or off (it starts on). */
  setStrict: (strict: boolean) => void;
  /** The worker's LLM_* settings that point it at this server as `provider` ("none": no LLM at all). */
  workerEnv: (provider: "openai" | "anthropic" | "none") => Record<string, string>;
  close: () => Promise<void>;
}

const readBody = async (req: IncomingMessage): Promise<Record<string, unknown>> => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  return raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
};

/** The text of the first user message (OpenAI and Anthropic bodies alike): what keys a conversation. */
const firstUserText = (body: Record<string, unknown>): string => {
  const messages = Array.isArray(body.messages) ? (body.messages as { role?: string; content?: unknown }[]) : [];
  const content = messages.find((m) => m.role === "user")?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return (content as { type?: string; text?: unknown }[])
    .map((part) => (typeof part.text === "string" ? part.text : ""))
    .join("\n");
};

const id = (prefix: string) => `${prefix}${randomBytes(8).toString("hex")}`;

type Answer = Exclude<ScriptedReply, { error: unknown }>;

/** The tokens of a request as the scripted server counts them: its prompt as JSON, four bytes a token. */
export const contextLimitTokens = (body: Record<string, unknown>): number =>
  Math.ceil(
    Buffer.byteLength(JSON.stringify({ system: body.system, messages: body.messages, tools: body.tools }), "utf8") / 4,
  );

const argsText = (a: string | Record<string, unknown>) => (typeof a === "string" ? a : JSON.stringify(a));

/** Splits a string in a few pieces, as a streaming server would. */
const pieces = (s: string): string[] => {
  if (s.length < 4) return [s];
  const third = Math.ceil(s.length / 3);
  return [s.slice(0, third), s.slice(third, 2 * third), s.slice(2 * third)];
};

const sse = (res: ServerResponse) => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  return (data: unknown, event?: string) => {
    res.write(`${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
  };
};

const openaiReply = (res: ServerResponse, body: Record<string, unknown>, a: Answer) => {
  const model = String(body.model ?? "scripted");
  const completionId = id("chatcmpl-");
  const calls = (a.toolCalls ?? []).map((c) => ({
    id: c.id ?? id("call_"),
    name: c.name,
    arguments: argsText(c.arguments),
  }));
  const usage = {
    prompt_tokens: a.usage?.input ?? 10,
    completion_tokens: a.usage?.output ?? 5,
    total_tokens: (a.usage?.input ?? 10) + (a.usage?.output ?? 5),
    ...(a.usage?.cacheRead ? { prompt_tokens_details: { cached_tokens: a.usage.cacheRead } } : {}),
    ...(a.usage?.reasoning ? { completion_tokens_details: { reasoning_tokens: a.usage.reasoning } } : {}),
  };
  const finish = a.truncated ? "length" : calls.length ? "tool_calls" : "stop";
  const created = Math.floor(Date.now() / 1000);
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id: completionId,
        object: "chat.completion",
        created,
        model,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: a.text ?? null,
              ...(calls.length
                ? {
                    tool_calls: calls.map((c) => ({
                      id: c.id,
                      type: "function",
                      function: { name: c.name, arguments: c.arguments },
                    })),
                  }
                : {}),
            },
            finish_reason: finish,
          },
        ],
        usage,
      }),
    );
    return;
  }
  const send = sse(res);
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
    send({
      id: completionId,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finishReason }],
    });
  chunk({ role: "assistant", content: "" });
  for (const p of a.text ? pieces(a.text) : []) chunk({ content: p });
  calls.forEach((c, index) => {
    chunk({ tool_calls: [{ index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] });
    for (const p of pieces(c.arguments)) chunk({ tool_calls: [{ index, function: { arguments: p } }] });
  });
  chunk({}, finish);
  const streamOptions = body.stream_options as { include_usage?: boolean } | undefined;
  if (streamOptions?.include_usage) {
    send({ id: completionId, object: "chat.completion.chunk", created, model, choices: [], usage });
  }
  send("[DONE]");
  res.end();
};

const inputOf = (args: string): unknown => {
  try {
    return JSON.parse(args || "{}");
  } catch {
    return {}; // a reply cut mid-call (truncated): the stream carries the broken text as it is
  }
};

type ThinkingBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string };

/** The reply's thinking blocks, signed, and remembered so that a changed one is refused when it comes back. */
const thinkingBlocks = (body: Record<string, unknown>, a: Answer, memory: ThinkingMemory, reply: string) => {
  const on = ["enabled", "adaptive"].includes(String((body.thinking as { type?: unknown } | undefined)?.type));
  const scripted = a.thinking ?? (on ? [{ thinking: "Let me think this through before I act." }] : []);
  return scripted.map((t, position): ThinkingBlock => {
    if ("redacted" in t) {
      memory.redacted.set(t.redacted, { reply, position });
      return { type: "redacted_thinking", data: t.redacted };
    }
    const signature = randomBytes(48).toString("base64");
    memory.thinking.set(signature, { text: t.thinking, reply, position });
    return { type: "thinking", thinking: t.thinking, signature };
  });
};

const anthropicReply = (res: ServerResponse, body: Record<string, unknown>, a: Answer, memory: ThinkingMemory) => {
  const model = String(body.model ?? "scripted");
  const messageId = id("msg_");
  const calls = (a.toolCalls ?? []).map((c) => ({
    id: c.id ?? id("toolu_"),
    name: c.name,
    arguments: argsText(c.arguments),
  }));
  const usage = {
    input_tokens: a.usage?.input ?? 10,
    output_tokens: a.usage?.output ?? 5,
    ...(a.usage?.cacheRead !== undefined ? { cache_read_input_tokens: a.usage.cacheRead } : {}),
    ...(a.usage?.cacheWrite !== undefined ? { cache_creation_input_tokens: a.usage.cacheWrite } : {}),
  };
  const stopReason = a.truncated ? "max_tokens" : calls.length ? "tool_use" : "end_turn";
  const thinking = thinkingBlocks(body, a, memory, messageId);
  const content = [
    ...thinking,
    ...(a.text ? [{ type: "text", text: a.text }] : []),
    ...calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: inputOf(c.arguments) })),
  ];
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id: messageId,
        type: "message",
        role: "assistant",
        model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage,
      }),
    );
    return;
  }
  const send = sse(res);
  const ev = (type: string, data: Record<string, unknown>) => send({ type, ...data }, type);
  ev("message_start", {
    message: {
      id: messageId,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usage, output_tokens: 1 },
    },
  });
  let index = 0;
  for (const t of thinking) {
    if (t.type === "redacted_thinking") ev("content_block_start", { index, content_block: t });
    else {
      ev("content_block_start", { index, content_block: { type: "thinking", thinking: "", signature: "" } });
      for (const p of pieces(t.thinking))
        ev("content_block_delta", { index, delta: { type: "thinking_delta", thinking: p } });
      ev("content_block_delta", { index, delta: { type: "signature_delta", signature: t.signature } });
    }
    ev("content_block_stop", { index });
    index++;
  }
  if (a.text) {
    ev("content_block_start", { index, content_block: { type: "text", text: "" } });
    for (const p of pieces(a.text)) ev("content_block_delta", { index, delta: { type: "text_delta", text: p } });
    ev("content_block_stop", { index });
    index++;
  }
  for (const c of calls) {
    ev("content_block_start", { index, content_block: { type: "tool_use", id: c.id, name: c.name, input: {} } });
    for (const p of pieces(c.arguments))
      ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: p } });
    ev("content_block_stop", { index });
    index++;
  }
  ev("message_delta", {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens },
  });
  ev("message_stop", {});
  res.end();
};

/** The provider's own refusal of a request longer than the model's context. */
const contextLengthReply = (res: ServerResponse, provider: "openai" | "anthropic", tokens: number, limit: number) => {
  res.writeHead(400, { "content-type": "application/json" });
  res.end(
    JSON.stringify(
      provider === "openai"
        ? {
            error: {
              message:
                `This model's maximum context length is ${limit} tokens. However, your messages resulted in ` +
                `${tokens} tokens. Please reduce the length of the messages.`,
              type: "invalid_request_error",
              param: "messages",
              code: "context_length_exceeded",
            },
          }
        : {
            type: "error",
            error: {
              type: "invalid_request_error",
              message: `prompt is too long: ${tokens} tokens > ${limit} maximum`,
            },
          },
    ),
  );
};

const ANTHROPIC_ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  529: "overloaded_error",
};

/** An error answer with the provider's body: OpenAI's `{error:{message,type,param,code}}`, Anthropic's `{type:"error",error:{type,message}}`. */
const errorReply = (
  res: ServerResponse,
  provider: "openai" | "anthropic",
  status: number,
  message: string,
  extra: { param?: string | null; code?: string | null; headers?: Record<string, string> } = {},
) => {
  res.writeHead(status, { "content-type": "application/json", ...extra.headers });
  const openaiType = status === 429 ? "requests" : status >= 500 ? "server_error" : "invalid_request_error";
  const openaiCode = status === 429 ? "rate_limit_exceeded" : null;
  res.end(
    JSON.stringify(
      provider === "openai"
        ? { error: { message, type: openaiType, param: extra.param ?? null, code: extra.code ?? openaiCode } }
        : {
            type: "error",
            error: {
              type: ANTHROPIC_ERROR_TYPES[status] ?? (status >= 500 ? "api_error" : "invalid_request_error"),
              message,
            },
          },
    ),
  );
};

/**
 * An LLM of our own on 127.0.0.1 speaking OpenAI chat completions (POST /v1/chat/completions) and
 * Anthropic messages (POST /v1/messages), streamed or not as the client asks. It answers with the
 * scripted replies in order and records what it was sent, so tests can check the history, the
 * tools and the skills the agent gave the model.
 */
export const startLlmServer = async (
  script: ScriptedReply[] = [],
  options: LlmServerOptions = {},
): Promise<ScriptedLlmServer> => {
  let strict = options.strict ?? true;
  const thinkingSent = newThinkingMemory();
  const queue = [...script];
  const keyed = new Map<string, ScriptedReply[]>();
  const keyOf = (body: Record<string, unknown>): string | null => {
    const text = firstUserText(body);
    return [...keyed.keys()].find((k) => text.includes(k)) ?? null;
  };
  const requests: RecordedRequest[] = [];
  let contextLimit: number | null = null;
  let responder: ((request: RecordedRequest) => ScriptedReply) | null = null;
  const server = createServer((req, res) => {
    const provider = req.url?.startsWith("/v1/chat/completions")
      ? "openai"
      : req.url?.startsWith("/v1/messages")
        ? "anthropic"
        : null;
    if (req.method !== "POST" || !provider) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    void (async () => {
      const body = await readBody(req);
      const tokens = contextLimitTokens(body);
      const violation = !strict
        ? null
        : provider === "openai"
          ? openAiViolation(body)
          : anthropicViolation(body, thinkingSent);
      const refusedForLength = !violation && contextLimit !== null && tokens > contextLimit;
      const recorded: RecordedRequest = {
        provider,
        stream: body.stream === true,
        body,
        headers: req.headers,
        tokens,
        refusedForLength,
        violation: typeof violation === "string" ? violation : (violation?.message ?? null),
      };
      requests.push(recorded);
      if (violation) {
        // Said in the test's output too: the agent only sees a 400 and may end its run with it.
        console.error(`[scripted LLM] refused a request as ${provider} would: ${recorded.violation}`);
        return typeof violation === "string"
          ? errorReply(res, provider, 400, violation)
          : errorReply(res, provider, 400, violation.message, violation);
      }
      if (refusedForLength) return contextLengthReply(res, provider, tokens, contextLimit ?? 0);
      const key = keyOf(body);
      const reply = (key === null ? queue.shift() : keyed.get(key)?.shift()) ?? responder?.(recorded);
      if (!reply) {
        const which = key === null ? "" : ` for "${key}"`;
        return errorReply(res, provider, 400, `the scripted LLM server has no reply left${which}`);
      }
      if ("error" in reply) {
        const { status, message, retryAfter, headers } = reply.error;
        return errorReply(res, provider, status, message ?? "scripted error", {
          headers: { ...(retryAfter !== undefined ? { "retry-after": String(retryAfter) } : {}), ...headers },
        });
      }
      if (reply.before) await reply.before();
      if (provider === "openai") openaiReply(res, body, reply);
      else anthropicReply(res, body, reply, thinkingSent);
    })().catch((err: unknown) => {
      if (!res.headersSent) errorReply(res, provider, 500, `scripted server failed: ${String(err)}`);
      else res.end();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    openaiBaseUrl: `${url}/v1`,
    anthropicBaseUrl: url,
    push: (...replies) => void queue.push(...replies),
    requests,
    remaining: () => queue.length,
    clear: () => {
      queue.splice(0);
      keyed.clear();
    },
    pushFor: (key, ...replies) => {
      const queued = keyed.get(key) ?? [];
      queued.push(...replies);
      keyed.set(key, queued);
    },
    remainingFor: (key) => keyed.get(key)?.length ?? 0,
    requestsFor: (key) => requests.filter((r) => firstUserText(r.body).includes(key)),
    setContextLimit: (tokens) => {
      contextLimit = tokens;
    },
    setResponder: (r) => {
      responder = r;
    },
    setStrict: (on) => {
      strict = on;
    },
    workerEnv: (provider) =>
      provider === "none"
        ? { LLM_PROVIDER: "", LLM_BASE_URL: "", LLM_API_KEY: "", LLM_MODEL: "", LLM_MODELS: "" }
        : {
            LLM_PROVIDER: provider,
            LLM_BASE_URL: provider === "openai" ? `${url}/v1` : url,
            LLM_API_KEY: "test-key",
            LLM_MODEL: provider === "openai" ? "gpt-test" : "claude-test",
            // The scripted server answers as any model: a test's llm_model is the operator's to allow.
            LLM_MODELS: "*",
          },
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, "close").catch(() => undefined);
    },
  };
};
