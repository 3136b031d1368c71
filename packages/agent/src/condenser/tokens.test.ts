import { describe, expect, it } from "vitest";
import { estimateTokens, IMAGE_TOKENS } from "./tokens.ts";

describe("estimateTokens", () => {
  it("counts an image at its fixed cost, not by its base64 bytes, in requests and in events", () => {
    const screenshot = `data:image/png;base64,${"A".repeat(3_000_000)}`;
    const text = { role: "tool", text: "x".repeat(300) };
    const base = estimateTokens(text);
    expect(base).toBe(Math.ceil(JSON.stringify(text).length / 3));
    expect(estimateTokens({ ...text, images: [screenshot, screenshot] })).toBe(base + 2 * IMAGE_TOKENS);
    const observation = { content: [{ type: "text", text: "seen" }] };
    expect(
      estimateTokens({ content: [...observation.content, { type: "image", image_urls: [screenshot] }] }),
    ).toBeGreaterThanOrEqual(estimateTokens(observation) + IMAGE_TOKENS);
    expect(estimateTokens("abcdef")).toBe(2);
  });
});
