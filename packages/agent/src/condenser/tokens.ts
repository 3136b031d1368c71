/**
 * Tokens of a request, estimated without the provider's tokenizer (Anthropic publishes none, and
 * OpenAI's differ by model): one token per three UTF-8 bytes. Tokenizers give English prose about
 * four bytes a token and code and JSON three to four; CJK text is three bytes a character and about
 * a token each. So the estimate runs high, never low, for what agents send: a condensation comes a
 * little early rather than a request too long (and the provider's refusal is the backstop).
 */
export const BYTES_PER_TOKEN = 3;

export const estimateTokens = (value: unknown): number =>
  Math.ceil(Buffer.byteLength(typeof value === "string" ? value : JSON.stringify(value), "utf8") / BYTES_PER_TOKEN);
