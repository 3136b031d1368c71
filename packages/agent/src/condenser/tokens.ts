/**
 * Tokens of a request, estimated without the provider's tokenizer (Anthropic publishes none, and
 * OpenAI's differ by model): one token per three UTF-8 bytes. Tokenizers give English prose about
 * four bytes a token and code and JSON three to four; CJK text is three bytes a character and about
 * a token each. So the estimate runs high, never low, for what agents send: a condensation comes a
 * little early rather than a request too long (and the provider's refusal is the backstop).
 */
export const BYTES_PER_TOKEN = 3;

/**
 * Tokens one image costs, whatever its bytes: providers scale an image down and bill it by its
 * pixels, Anthropic at most about 1 600 tokens (1.15 megapixels / 750), OpenAI's high detail
 * less. Counted by its base64 bytes instead, one screenshot would weigh as a whole context.
 */
export const IMAGE_TOKENS = 1_600;

/** Where images sit: LlmMessage's `images`, ImageContent's `image_urls` (events). */
const IMAGE_KEYS = new Set(["images", "image_urls"]);

export const estimateTokens = (value: unknown): number => {
  if (typeof value === "string") return Math.ceil(Buffer.byteLength(value, "utf8") / BYTES_PER_TOKEN);
  let images = 0;
  const json = JSON.stringify(value, (key, v) => {
    if (IMAGE_KEYS.has(key) && Array.isArray(v)) {
      images += v.length;
      return undefined;
    }
    return v;
  });
  return Math.ceil(Buffer.byteLength(json ?? "", "utf8") / BYTES_PER_TOKEN) + images * IMAGE_TOKENS;
};
