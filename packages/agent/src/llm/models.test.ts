import { describe, expect, it } from "vitest";
import { contextWindowOf, knownModelFacts, lookUpModel, modelTable, priceOf } from "./models.ts";

describe("lookUpModel", () => {
  const base = { "gpt-4o": 1, "gpt-4o-mini": 2, "claude-opus-4": 3 };

  it("finds a model by its name, or as a dated or tagged snapshot of one, provider prefix ignored", () => {
    expect(lookUpModel("gpt-4o", [base])).toBe(1);
    expect(lookUpModel("gpt-4o-2024-08-06", [base])).toBe(1);
    expect(lookUpModel("gpt-4o-mini-2024-07-18", [base])).toBe(2);
    expect(lookUpModel("openai/gpt-4o-mini", [base])).toBe(2);
    expect(lookUpModel("anthropic/claude-opus-4-20250514", [base])).toBe(3);
    expect(lookUpModel("gpt-4o-latest", [base])).toBe(1);
  });

  it("takes no newer model for an older one it starts like", () => {
    // claude-opus-4-8 is not a snapshot of claude-opus-4: its price and limits are its own.
    expect(lookUpModel("claude-opus-4-8", [base])).toBeNull();
    expect(lookUpModel("gpt-4o-mini-tts", [base])).toBeNull();
    expect(lookUpModel("gpt-4", [base])).toBeNull();
    expect(lookUpModel("gpt-4oz", [base])).toBeNull();
  });

  it("asks the tables in order", () => {
    expect(lookUpModel("gpt-4o", [{ "gpt-4o": 9 }, base])).toBe(9);
    expect(lookUpModel("gpt-4o-2024-05-13", [{}, base])).toBe(1);
  });
});

describe("the model table", () => {
  it("holds each current family's window, output, price and abilities", () => {
    expect(knownModelFacts("claude-sonnet-4-5-20250929")).toMatchObject({
      vendor: "anthropic",
      contextWindow: 200_000,
      maxOutput: 64_000,
      reasoning: "thinking",
      images: true,
      tools: true,
    });
    expect(knownModelFacts("claude-opus-4-5-20251101")?.price).toMatchObject({ input: 5, output: 25 });
    expect(knownModelFacts("gpt-5-mini-2025-08-07")).toMatchObject({ vendor: "openai", reasoning: "effort" });
    expect(knownModelFacts("gpt-4o")).toMatchObject({ reasoning: "none", maxOutput: 16_384 });
    expect(knownModelFacts("gemini/gemini-2.5-pro")).toMatchObject({ vendor: "gemini", maxOutput: 65_536 });
    expect(knownModelFacts("deepseek-reasoner")).toMatchObject({ vendor: "deepseek", tools: false, images: false });
    expect(knownModelFacts("some-local-model")).toBeNull();
  });

  it("gives every model an output below its window and a price", () => {
    for (const [name, facts] of Object.entries(modelTable)) {
      expect(facts.maxOutput, name).toBeLessThan(facts.contextWindow);
      expect(facts.price.output, name).toBeGreaterThan(0);
    }
  });

  it("lets the operator's prices and windows override the table and add models", () => {
    expect(priceOf("my-model", { "my-model": { input: 1, output: 2 } })).toEqual({ input: 1, output: 2 });
    expect(priceOf("gpt-4o", { "gpt-4o": { input: 0, output: 0 } })).toEqual({ input: 0, output: 0 });
    expect(priceOf("gpt-4o")).toMatchObject({ input: 2.5, output: 10 });
    expect(priceOf("no-such-model")).toBeNull();
    expect(contextWindowOf("openai/my-model-v2", { "my-model": 4096 })).toBe(4096);
    expect(contextWindowOf("claude-haiku-4-5")).toBe(200_000);
    expect(contextWindowOf("no-such-model")).toBeNull();
  });
});
