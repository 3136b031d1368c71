import { describe, expect, it } from "vitest";
import { chooseLlm } from "./select.ts";

describe("chooseLlm", () => {
  const configured = { LLM_PROVIDER: "openai" as const, LLM_API_KEY: "k", LLM_MODEL: "gpt-x" };

  it("uses LLM_PROVIDER and LLM_MODEL by default", () => {
    const c = chooseLlm(configured, null);
    expect(c.ok && [c.client.provider, c.client.model]).toEqual(["openai", "gpt-x"]);
  });

  it("never sends the operator's key to another provider, whatever prefix llm_model carries", () => {
    const c = chooseLlm({ ...configured, LLM_MODELS: ["*"] }, "anthropic/claude-y");
    expect(c.ok).toBe(false);
    expect(!c.ok && c.reason).toMatch(/anthropic model; this deployment's LLM is openai/);
    const d = chooseLlm({ ...configured, LLM_MODELS: ["*"] }, "openai/gpt-other");
    expect(d.ok && [d.client.provider, d.client.model]).toEqual(["openai", "gpt-other"]);
  });

  it("holds the operator's key to LLM_MODELS, or to LLM_MODEL when that is unset", () => {
    expect(chooseLlm(configured, "gpt-expensive").ok).toBe(false);
    expect(chooseLlm(configured, "openai/gpt-x").ok).toBe(true);
    const listed = { ...configured, LLM_MODELS: ["gpt-x", "openai/gpt-y"] };
    expect(chooseLlm(listed, "gpt-y").ok).toBe(true);
    const refused = chooseLlm(listed, "meta-llama/llama-3");
    expect(!refused.ok && refused.reason).toMatch(
      /not offered by this deployment \(LLM_MODELS: gpt-x, openai\/gpt-y\)/,
    );
  });

  it("uses the user's own key for any model, sent only to their base URL or the model's provider", () => {
    const own = chooseLlm(configured, "anthropic/claude-y", {}, { model: null, baseUrl: null, apiKey: "mine" });
    expect(own.ok && [own.client.provider, own.client.model, own.ownKey]).toEqual(["anthropic", "claude-y", true]);
    const byUser = chooseLlm(configured, null, {}, { model: "gpt-user", baseUrl: null, apiKey: "mine" });
    expect(byUser.ok && byUser.client.model).toBe("gpt-user");
    // Without a key of their own, the user's model still needs the operator's allow-list.
    expect(chooseLlm(configured, null, {}, { model: "gpt-user", baseUrl: null, apiKey: null }).ok).toBe(false);
  });

  it("refuses a user's base URL inside the deployment unless LLM_USER_BASE_URLS allows it", () => {
    const user = { model: "m", baseUrl: "http://127.0.0.1:9/v1", apiKey: "mine" };
    const c = chooseLlm(configured, null, {}, user);
    expect(!c.ok && c.reason).toMatch(/must be https/);
    expect(chooseLlm(configured, null, {}, { ...user, baseUrl: "https://10.1.2.3/v1" }).ok).toBe(false);
    expect(chooseLlm(configured, null, {}, { ...user, baseUrl: "https://169.254.169.254/v1" }).ok).toBe(false);
    expect(chooseLlm({ ...configured, LLM_USER_BASE_URLS: ["http://127.0.0.1:9"] }, null, {}, user).ok).toBe(true);
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
