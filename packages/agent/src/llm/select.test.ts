import { describe, expect, it } from "vitest";
import { chooseLlm } from "./select.ts";

describe("chooseLlm", () => {
  const configured = { LLM_PROVIDER: "openai" as const, LLM_API_KEY: "k", LLM_MODEL: "gpt-x" };

  it("uses LLM_PROVIDER and LLM_MODEL by default", () => {
    const c = chooseLlm(configured, null);
    expect(c.ok && [c.client.provider, c.client.model]).toEqual(["openai", "gpt-x"]);
  });

  it("lets the conversation's llm_model pick the provider by its prefix", () => {
    const c = chooseLlm(configured, "anthropic/claude-y");
    expect(c.ok && [c.client.provider, c.client.model]).toEqual(["anthropic", "claude-y"]);
    const d = chooseLlm(configured, "meta-llama/llama-3");
    expect(d.ok && [d.client.provider, d.client.model]).toEqual(["openai", "meta-llama/llama-3"]);
  });

  it("says how to configure an LLM when none is", () => {
    const c = chooseLlm({}, null);
    expect(c.ok).toBe(false);
    expect(!c.ok && c.reason).toMatch(/LLM_PROVIDER.*LLM_MODEL.*LLM_API_KEY/);
    expect(chooseLlm({ LLM_PROVIDER: "openai", LLM_MODEL: "m" }, null).ok).toBe(false);
    expect(chooseLlm({ LLM_PROVIDER: "openai", LLM_MODEL: "m", LLM_BASE_URL: "http://127.0.0.1:1/v1" }, null).ok).toBe(
      true,
    );
  });
});
