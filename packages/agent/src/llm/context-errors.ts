import { LlmContextLengthError, LlmError } from "./types.ts";

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

/** The LlmError for a provider's refusal: an LlmContextLengthError when it is about the context's length. */
export const llmErrorOf = (message: string, status: number | null, code: unknown, cause: unknown): LlmError =>
  isContextLengthRefusal(status, message, code)
    ? new LlmContextLengthError(message, status, { cause })
    : new LlmError(message, status, { cause });
