import { createAnthropicClient } from "./anthropic.ts";
import { createOpenAiClient } from "./openai.ts";
import type { LlmClient, LlmProvider } from "./types.ts";

export interface LlmSettings {
  LLM_PROVIDER?: LlmProvider | undefined;
  LLM_BASE_URL?: string | undefined;
  LLM_API_KEY?: string | undefined;
  LLM_MODEL?: string | undefined;
}

export interface LlmClientOptions {
  maxRetries?: number;
  timeoutMs?: number;
  maxTokens?: number;
}

export type LlmChoice = { ok: true; client: LlmClient } | { ok: false; reason: string };

const providerPrefixes: Record<string, LlmProvider> = { openai: "openai", anthropic: "anthropic" };

export const howToConfigureLlm =
  "Set LLM_PROVIDER (openai or anthropic), LLM_MODEL (e.g. gpt-4o or claude-sonnet-4-5) and LLM_API_KEY " +
  "(or LLM_BASE_URL for an OpenAI-compatible server without keys, such as vLLM or Ollama) in the worker's " +
  "environment, or start the conversation with llm_model `openai/<model>` or `anthropic/<model>`.";

/**
 * The conversation's `llm_model` wins over LLM_MODEL; a provider prefix (`openai/…`, `anthropic/…`,
 * as LiteLLM writes them) picks the provider and is stripped, otherwise LLM_PROVIDER decides.
 */
export const chooseLlm = (
  settings: LlmSettings,
  llmModel: string | null,
  options: LlmClientOptions = {},
): LlmChoice => {
  let model = llmModel?.trim() || settings.LLM_MODEL;
  let provider = settings.LLM_PROVIDER;
  const slash = model?.indexOf("/") ?? -1;
  if (model && slash > 0) {
    const prefixed = providerPrefixes[model.slice(0, slash).toLowerCase()];
    if (prefixed) {
      provider = prefixed;
      model = model.slice(slash + 1);
    }
  }
  if (!provider) return { ok: false, reason: `No LLM is configured: no provider. ${howToConfigureLlm}` };
  if (!model) return { ok: false, reason: `No LLM is configured: no model. ${howToConfigureLlm}` };
  if (!settings.LLM_API_KEY && !settings.LLM_BASE_URL) {
    return { ok: false, reason: `No LLM is configured: no API key. ${howToConfigureLlm}` };
  }
  const common = {
    model,
    apiKey: settings.LLM_API_KEY,
    baseUrl: settings.LLM_BASE_URL,
    maxRetries: options.maxRetries ?? 4,
    timeoutMs: options.timeoutMs ?? 600_000,
  };
  // One LLM_BASE_URL serves both wires (e.g. a LiteLLM proxy): OpenAI's SDK wants it with /v1,
  // Anthropic's adds /v1 itself.
  const client =
    provider === "anthropic"
      ? createAnthropicClient({
          ...common,
          baseUrl: common.baseUrl?.replace(/\/v1\/?$/, ""),
          maxTokens: options.maxTokens ?? 4096,
        })
      : createOpenAiClient(common);
  return { ok: true, client };
};
