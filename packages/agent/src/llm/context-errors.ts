import { OutboundAddressError, OutboundResponseTooLargeError } from "@tern/core";
import { LlmContextLengthError, LlmError, type LlmRetryWait } from "./types.ts";

/**
 * How providers word "the request is longer than the context" (OpenAI's `context_length_exceeded`,
 * Anthropic's "prompt is too long", and the OpenAI-compatible servers: vLLM, Ollama, LiteLLM,
 * OpenRouter, Bedrock and Gemini behind proxies), as LiteLLM's ContextWindowExceededError maps them.
 */
const contextLengthPatterns = [
  /context[_ ]length[_ ]exceeded/i,
  /maximum context length/i,
  /prompt is too long/i,
  /input length and `?max_tokens`? exceed context limit/i,
  /context window/i,
  /exceeds? (the )?(model'?s? )?(maximum )?(context|input)/i,
  /too many (input )?tokens/i,
  /input is too long/i,
  /reduce the length of the (messages|input|prompt)/i,
];

/** Whether a provider's refusal says the request is longer than the model's context. */
export const isContextLengthRefusal = (status: number | null, message: string, code?: unknown): boolean => {
  if (code === "context_length_exceeded") return true;
  // A context-length refusal is a client error (400, 413, some proxies 422); a 5xx that mentions the
  // context is the server's trouble, and a 429 ("too many tokens per minute") a rate limit.
  if (status !== null && (status < 400 || status >= 500 || status === 429)) return false;
  return contextLengthPatterns.some((p) => p.test(message));
};

/** The error, or one on its `cause` chain, that is of `type`. */
const causeOf = <T>(err: unknown, type: abstract new (...args: never[]) => T): T | null => {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof type) return e;
  }
  return null;
};

/** A provider's error code when it is a short token (`context_length_exceeded`), not free text. */
const codeToken = (code: unknown): string | null =>
  typeof code === "string" && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? code : null;

/** What an SDK's APIError tells of a failed call. */
export interface ApiFailure {
  status: number | null;
  code: unknown;
  /** The answer's headers (Retry-After); absent when there was no answer. */
  headers?: Headers | Record<string, string | null | undefined> | undefined;
}

const headerOf = (headers: ApiFailure["headers"], name: string): string | null => {
  if (!headers) return null;
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name);
  const value = (headers as Record<string, string | null | undefined>)[name];
  return typeof value === "string" ? value : null;
};

/**
 * How long the provider asks to wait, in ms: `retry-after-ms` (OpenAI's), else `Retry-After` in
 * seconds or as an HTTP date (RFC 9110 §10.2.3). Null when it says nothing usable.
 */
export const retryAfterMsOf = (headers: ApiFailure["headers"], now = Date.now()): number | null => {
  const ms = Number.parseFloat(headerOf(headers, "retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return Math.ceil(ms);
  const raw = headerOf(headers, "retry-after")?.trim();
  if (!raw) return null;
  if (/^\d+(\.\d+)?$/.test(raw)) return Math.ceil(Number.parseFloat(raw) * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
};

const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** A connection refused, reset or cut short (Node's fetch says `fetch failed` or `terminated`). */
const isNetworkFailure = (err: unknown): boolean => {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    if (e instanceof TypeError && /^(fetch failed|terminated)$/i.test(e.message)) return true;
  }
  return false;
};

/**
 * Whether retrying may cure a failure, and why: 429 a rate limit, 529 (or an overload reported in
 * the stream) an overload, 5xx the server's trouble, no status a lost connection. 408 and 409 are
 * retried as the SDKs retry them.
 */
export const transientReason = (api: ApiFailure | null, err: unknown, text: string): LlmRetryWait["reason"] | null => {
  if (!api) return isNetworkFailure(err) ? "network" : null;
  const { status } = api;
  if (status === 429) return "rate_limited";
  if (status === 529 || /overloaded/i.test(text)) return "overloaded";
  if (status === 408 || status === 409 || (status !== null && status >= 500)) return "server_error";
  if (status === null) return "network";
  return null;
};

/**
 * The LlmError of a failed call: `api` is the SDK's APIError's status and code, null for anything
 * else it threw (an answer it cannot parse, a stream cut short). An endpoint a user named answers as
 * it likes, so with `userNamed` its words (a refusal's body, a parse error quoting it) never reach
 * the user: only its status, a short error code, and whether condensing may cure it (decided on the
 * whole text, which stays on the error's cause for the log). A refusal of the checked client (an
 * address inside the deployment) says why.
 */
export const llmFailureOf = (err: unknown, api: ApiFailure | null, userNamed: boolean): LlmError => {
  const refused = causeOf(err, OutboundAddressError);
  if (refused) return new LlmError(`LLM request refused: llm_base_url ${refused.message}`, null, { cause: err });
  const tooLarge = causeOf(err, OutboundResponseTooLargeError);
  if (tooLarge) return new LlmError(`LLM request failed: ${tooLarge.message}`, null, { cause: err });
  const text = err instanceof Error ? err.message : String(err);
  if (!api) {
    const transient = transientReason(null, err, text);
    const shown =
      userNamed && !transient ? "the LLM endpoint's answer could not be read" : userNamed ? "connection lost" : text;
    return new LlmError(`LLM request failed: ${shown}`, null, { cause: err, transient });
  }
  const context = isContextLengthRefusal(api.status, text, api.code);
  const code = codeToken(api.code);
  const shown = !userNamed
    ? text
    : api.status === null
      ? "the LLM endpoint could not be reached"
      : `the LLM endpoint answered HTTP ${api.status}${code ? ` (${code})` : ""}${context ? ": the request is longer than the model's context" : ""}`;
  const Type = context ? LlmContextLengthError : LlmError;
  return new Type(`LLM request failed: ${shown}`, api.status, {
    cause: err,
    transient: context ? null : transientReason(api, err, text),
    retryAfterMs: retryAfterMsOf(api.headers),
  });
};
