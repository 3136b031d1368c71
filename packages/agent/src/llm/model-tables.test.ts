import { describe, expect, it } from "vitest";
import { contextWindowOf } from "./context-windows.ts";
import { lookUpModel } from "./model-tables.ts";
import { priceOf } from "./prices.ts";

describe("lookUpModel", () => {
  const base = { "gpt-4o": 1, "gpt-4o-mini": 2, claude: 3 };

  it("finds a model by its name, or by the longest key it extends with a dash, provider prefix ignored", () => {
    expect(lookUpModel("gpt-4o", [base])).toBe(1);
    expect(lookUpModel("gpt-4o-2024-08-06", [base])).toBe(1);
    expect(lookUpModel("gpt-4o-mini-2024-07-18", [base])).toBe(2);
    expect(lookUpModel("openai/gpt-4o-mini", [base])).toBe(2);
    expect(lookUpModel("anthropic/claude-x", [base])).toBe(3);
  });

  it("asks the tables in order, and knows nothing of a name no table holds", () => {
    expect(lookUpModel("gpt-4o", [{ "gpt-4o": 9 }, base])).toBe(9);
    expect(lookUpModel("gpt-4o-2024", [{}, base])).toBe(1);
    expect(lookUpModel("gpt-4", [base])).toBeNull();
    expect(lookUpModel("gpt-4oz", [base])).toBeNull();
  });

  it("serves the price and the context-window tables, the operator's entries first", () => {
    expect(priceOf("my-model", { "my-model": { input: 1, output: 2 } })).toEqual({ input: 1, output: 2 });
    expect(contextWindowOf("openai/my-model-v2", { "my-model": 4096 })).toBe(4096);
    expect(contextWindowOf("no-such-model")).toBeNull();
  });
});
