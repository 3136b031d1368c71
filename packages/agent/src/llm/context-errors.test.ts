import { describe, expect, it } from "vitest";
import { isContextLengthRefusal } from "./context-errors.ts";

describe("isContextLengthRefusal", () => {
  it("knows the providers' context-length refusals", () => {
    // OpenAI: the code says it.
    expect(
      isContextLengthRefusal(400, "400 This model's maximum context length is 8192 tokens.", "context_length_exceeded"),
    ).toBe(true);
    // Anthropic, and the OpenAI-compatible servers by their words.
    expect(isContextLengthRefusal(400, "400 prompt is too long: 210000 tokens > 200000 maximum", undefined)).toBe(true);
    expect(
      isContextLengthRefusal(
        400,
        "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
        undefined,
      ),
    ).toBe(true);
    expect(isContextLengthRefusal(400, "This model's maximum context length is 32768 tokens (vLLM)", null)).toBe(true);
    expect(isContextLengthRefusal(413, "Request exceeds the model's context window", null)).toBe(true);
  });

  it("leaves other failures alone", () => {
    expect(isContextLengthRefusal(400, "Invalid value for 'tools'", null)).toBe(false);
    expect(isContextLengthRefusal(429, "Rate limit reached: too many tokens per minute", null)).toBe(false);
    expect(isContextLengthRefusal(500, "maximum context length exceeded upstream", null)).toBe(false);
    expect(isContextLengthRefusal(401, "invalid x-api-key", null)).toBe(false);
  });
});
