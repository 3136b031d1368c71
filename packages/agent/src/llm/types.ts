/** The provider-neutral conversation the loop hands an LLM; each provider maps it to its wire format. */

import type { CheckedFetch, ToolCall } from "@tern/core";

/** A tool call as the model wrote it (its `arguments` JSON possibly malformed: the loop validates it). */
export type { ToolCall };

/** An Anthropic thinking block, kept as the API gave it: it goes back unchanged, signature and all. */
export type ThinkingBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string };

export type LlmMessage =
  /** `images`: URLs (http(s) or data:) the model is shown after the text, in order. */
  | { role: "user"; text: string; images?: string[] }
  | {
      role: "assistant";
      text: string;
      toolCalls: ToolCall[];
      /** The reply's thinking blocks (Anthropic), sent back before its text and calls. */
      thinkingBlocks?: ThinkingBlock[];
    }
  /** `images`: what the tool showed besides its text (file_editor viewing an image, an MCP tool's image). */
  | { role: "tool"; toolCallId: string; toolName: string; text: string; isError: boolean; images?: string[] };

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface LlmRequest {
  system: string;
  messages: LlmMessage[];
  tools: ToolDefinition[];
  /**
   * Requests that share it share a cached prefix (the conversation's id): OpenAI's
   * `prompt_cache_key`; Anthropic marks its cache breakpoints whenever a request is cached.
   */
  cacheKey?: string;
}

export interface LlmUsage {
  promptTokens: number;
  completionTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export interface LlmResponse {
  /** The provider's response id, when it gives one; the loop makes one otherwise. */
  id: string | null;
  text: string;
  toolCalls: ToolCall[];
  usage: LlmUsage;
  model: string;
  /**
   * The reply was cut by the output limit (Anthropic's `stop_reason: "max_tokens"` or
   * `"model_context_window_exceeded"`, OpenAI's `finish_reason: "length"`): its calls may be cut
   * mid-argument and must not run.
   */
  truncated?: boolean;
  /** Why the model stopped, in the provider's words (`end_turn`, `tool_use`, `length`...), when it said. */
  stopReason?: string | null;
  /** The model's reasoning as text (Anthropic's thinking, DeepSeek's `reasoning_content`), when it shows it. */
  reasoningContent?: string | null;
  /** Anthropic's thinking blocks as given: they go back unchanged within a tool-use turn. */
  thinkingBlocks?: ThinkingBlock[];
}

/** One wait before a retry of an LLM call, as the caller is told of it before it begins. */
export interface LlmRetryWait {
  /** 1 for the wait after the first failure. */
  attempt: number;
  waitMs: number;
  /** `rate_limited` (429), `overloaded` (529 or an overload in the stream), `server_error` (5xx), `network`. */
  reason: "rate_limited" | "overloaded" | "server_error" | "network";
  status: number | null;
  /** Whether the wait is the provider's own (Retry-After), not our backoff. */
  retryAfter: boolean;
  /** What failed, as the error said it. */
  message: string;
}

/** What a caller hears of one call while it runs. */
export interface LlmCallHooks {
  /** Before each wait for a retry; the wait begins when it returns. */
  onRetryWait?: (wait: LlmRetryWait) => void | Promise<void>;
}

export interface LlmClient {
  readonly provider: LlmProvider;
  readonly model: string;
  complete(request: LlmRequest, signal?: AbortSignal, hooks?: LlmCallHooks): Promise<LlmResponse>;
}

export type LlmProvider = "openai" | "anthropic";

/** What both providers' official SDK clients are built from. */
export interface SdkClientOptions {
  model: string;
  apiKey: string | undefined;
  baseUrl: string | undefined;
  timeoutMs: number;
  /** The checked client (core's outbound-fetch.ts) for an endpoint a user named; the SDK's own otherwise. */
  fetch?: CheckedFetch | undefined;
  /** The endpoint is one a user named: its error texts are not shown to the user (context-errors.ts). */
  userNamedEndpoint?: boolean | undefined;
}

/** The constructor options of either SDK (they name them alike). */
export const sdkConstructorOptions = (opts: SdkClientOptions) => ({
  // Local OpenAI-compatible servers and proxies need no key, but the SDKs insist on one.
  apiKey: opts.apiKey ?? "not-needed",
  baseURL: opts.baseUrl,
  // Retries are ours (retry.ts), counted against LLM_RETRY_MAX_WAIT and each one reported: the
  // SDK's own, hidden, would multiply them.
  maxRetries: 0,
  timeout: opts.timeoutMs,
  ...(opts.fetch ? { fetch: opts.fetch } : {}),
});

export interface LlmErrorOptions {
  cause?: unknown;
  /** What retrying may cure: the provider's rate limit, its overload, a 5xx, a lost connection. */
  transient?: LlmRetryWait["reason"] | null;
  /** How long the provider asked to wait (Retry-After, retry-after-ms), in ms. */
  retryAfterMs?: number | null;
}

/** The LLM failed for good (retries spent, or an error retrying cannot fix). */
export class LlmError extends Error {
  readonly status: number | null;
  readonly transient: LlmRetryWait["reason"] | null;
  readonly retryAfterMs: number | null;
  constructor(message: string, status: number | null, options: LlmErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "LlmError";
    this.status = status;
    this.transient = options.transient ?? null;
    this.retryAfterMs = options.retryAfterMs ?? null;
  }
}

/** The provider refused the request as longer than the model's context: condensing the history may cure it. */
export class LlmContextLengthError extends LlmError {
  constructor(message: string, status: number | null, options?: LlmErrorOptions) {
    super(message, status, options);
    this.name = "LlmContextLengthError";
  }
}
