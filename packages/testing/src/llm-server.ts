import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

/** One scripted answer of the server, given to the next request in order. */
export type ScriptedReply =
  | {
      text?: string;
      /** `arguments` as a string is sent verbatim (so it may be malformed JSON). */
      toolCalls?: { name: string; arguments: string | Record<string, unknown>; id?: string }[];
      /** `cacheRead`/`cacheWrite`: the cached prompt tokens the provider reports (Anthropic: beside `input`; OpenAI: within it). */
      usage?: { input: number; output: number; cacheRead?: number; cacheWrite?: number };
      /** The reply waits for this before it is sent (to hold an LLM call in flight). */
      before?: () => Promise<void>;
    }
  | { error: { status: number; message?: string } };

export interface RecordedRequest {
  provider: "openai" | "anthropic";
  stream: boolean;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  /** The request's size as the server counts it against its context limit (contextLimitTokens). */
  tokens: number;
  /** Refused with the provider's context-length error (over the limit of setContextLimit). */
  refusedForLength: boolean;
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
  };
  const finish = calls.length ? "tool_calls" : "stop";
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

const anthropicReply = (res: ServerResponse, body: Record<string, unknown>, a: Answer) => {
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
  const stopReason = calls.length ? "tool_use" : "end_turn";
  const content = [
    ...(a.text ? [{ type: "text", text: a.text }] : []),
    ...calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: JSON.parse(c.arguments || "{}") })),
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

const errorReply = (res: ServerResponse, provider: "openai" | "anthropic", status: number, message: string) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(
    JSON.stringify(
      provider === "openai"
        ? { error: { message, type: status >= 500 ? "server_error" : "invalid_request_error", code: null } }
        : { type: "error", error: { type: status >= 500 ? "api_error" : "invalid_request_error", message } },
    ),
  );
};

/**
 * An LLM of our own on 127.0.0.1 speaking OpenAI chat completions (POST /v1/chat/completions) and
 * Anthropic messages (POST /v1/messages), streamed or not as the client asks. It answers with the
 * scripted replies in order and records what it was sent, so tests can check the history, the
 * tools and the skills the agent gave the model.
 */
export const startLlmServer = async (script: ScriptedReply[] = []): Promise<ScriptedLlmServer> => {
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
      const refusedForLength = contextLimit !== null && tokens > contextLimit;
      const recorded: RecordedRequest = {
        provider,
        stream: body.stream === true,
        body,
        headers: req.headers,
        tokens,
        refusedForLength,
      };
      requests.push(recorded);
      if (refusedForLength) return contextLengthReply(res, provider, tokens, contextLimit ?? 0);
      const key = keyOf(body);
      const reply = (key === null ? queue.shift() : keyed.get(key)?.shift()) ?? responder?.(recorded);
      if (!reply) {
        const which = key === null ? "" : ` for "${key}"`;
        return errorReply(res, provider, 400, `the scripted LLM server has no reply left${which}`);
      }
      if ("error" in reply)
        return errorReply(res, provider, reply.error.status, reply.error.message ?? "scripted error");
      if (reply.before) await reply.before();
      if (provider === "openai") openaiReply(res, body, reply);
      else anthropicReply(res, body, reply);
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
