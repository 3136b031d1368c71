/** The provider-neutral conversation the loop hands an LLM; each provider maps it to its wire format. */

import type { CheckedFetch, ToolCall } from "@tern/core";

/** A tool call as the model wrote it (its `arguments` JSON possibly malformed: the loop validates it). */
export type { ToolCall };

export type LlmMessage =
  /** `images`: URLs (http(s) or data:) the model is shown after the text, in order. */
  | { role: "user"; text: string; images?: string[] }
  | { role: "assistant"; text: string; toolCalls: ToolCall[] }
  | { role: "tool"; toolCallId: string; toolName: string; text: string; isError: boolean };

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
}

export interface LlmClient {
  readonly provider: LlmProvider;
  readonly model: string;
  complete(request: LlmRequest, signal?: AbortSignal): Promise<LlmResponse>;
}

export type LlmProvider = "openai" | "anthropic";

/** What both providers' official SDK clients are built from. */
export interface SdkClientOptions {
  model: string;
  apiKey: string | undefined;
  baseUrl: string | undefined;
  /** Retries of the SDK on 408/409/429/5xx and connection errors, with exponential backoff. */
  maxRetries: number;
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
  maxRetries: opts.maxRetries,
  timeout: opts.timeoutMs,
  ...(opts.fetch ? { fetch: opts.fetch } : {}),
});

/** The LLM failed for good (retries spent, or an error retrying cannot fix). */
export class LlmError extends Error {
  readonly status: number | null;
  constructor(message: string, status: number | null, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LlmError";
    this.status = status;
  }
}

/** The provider refused the request as longer than the model's context: condensing the history may cure it. */
export class LlmContextLengthError extends LlmError {
  constructor(message: string, status: number | null, options?: { cause?: unknown }) {
    super(message, status, options);
    this.name = "LlmContextLengthError";
  }
}
