import { serverModelRefusal, splitModel, userBaseUrlRefusal } from "@tern/core";
import { createAnthropicClient } from "./anthropic.ts";
import { createOpenAiClient } from "./openai.ts";
import type { LlmClient, LlmProvider } from "./types.ts";

export interface LlmSettings {
  LLM_PROVIDER?: LlmProvider | undefined;
  LLM_BASE_URL?: string | undefined;
  LLM_API_KEY?: string | undefined;
  LLM_MODEL?: string | undefined;
  /** LLM_MODELS: what may run on the operator's key (unset: LLM_MODEL only). */
  LLM_MODELS?: readonly string[] | undefined;
  /** LLM_USER_BASE_URLS: where a user's own key may be sent. */
  LLM_USER_BASE_URLS?: readonly string[] | undefined;
}

/** The LLM settings of the conversation's user (/api/v1/settings), the key opened. */
export interface UserLlmSettings {
  model: string | null;
  baseUrl: string | null;
  apiKey: string | null;
}

export interface LlmClientOptions {
  maxRetries?: number;
  timeoutMs?: number;
  maxTokens?: number;
}

export type LlmChoice = { ok: true; client: LlmClient; ownKey: boolean } | { ok: false; reason: string };

export const howToConfigureLlm =
  "Set LLM_PROVIDER (openai or anthropic), LLM_MODEL (e.g. gpt-4o or claude-sonnet-4-5) and LLM_API_KEY " +
  "(or LLM_BASE_URL for an OpenAI-compatible server without keys, such as vLLM or Ollama) in the worker's " +
  "environment, or set your own llm_model and llm_api_key in /api/v1/settings.";

const build = (
  provider: LlmProvider,
  model: string,
  apiKey: string | undefined,
  baseUrl: string | undefined,
  options: LlmClientOptions,
): LlmClient => {
  const common = {
    model,
    apiKey,
    baseUrl,
    maxRetries: options.maxRetries ?? 4,
    timeoutMs: options.timeoutMs ?? 600_000,
  };
  // One base URL serves both wires (e.g. a LiteLLM proxy): OpenAI's SDK wants it with /v1,
  // Anthropic's adds /v1 itself.
  return provider === "anthropic"
    ? createAnthropicClient({
        ...common,
        baseUrl: common.baseUrl?.replace(/\/v1\/?$/, ""),
        maxTokens: options.maxTokens ?? 4096,
      })
    : createOpenAiClient(common);
};

/**
 * The LLM of a run. The model: the conversation's `llm_model` (the start request's, else the
 * user's setting, else LLM_MODEL, fixed when the conversation started), else the user's, else
 * LLM_MODEL. The credentials: the user's own llm_api_key / llm_base_url when they set one, sent
 * only to their base URL or to the public API of the model's provider (a `openai/` or `anthropic/`
 * prefix, else LLM_PROVIDER, else openai); otherwise the operator's, for the models of LLM_MODELS
 * of LLM_PROVIDER only (core's llm-access.ts).
 */
export const chooseLlm = (
  settings: LlmSettings,
  llmModel: string | null,
  options: LlmClientOptions = {},
  user: UserLlmSettings | null = null,
): LlmChoice => {
  const name = llmModel?.trim() || user?.model?.trim() || settings.LLM_MODEL;
  if (user && (user.apiKey || user.baseUrl)) {
    if (!name) return { ok: false, reason: `No LLM is configured: no model. ${howToConfigureLlm}` };
    if (user.baseUrl) {
      const refusal = userBaseUrlRefusal(user.baseUrl, settings.LLM_USER_BASE_URLS);
      if (refusal) return { ok: false, reason: `Your LLM settings cannot be used: ${refusal}.` };
    }
    const { provider, model } = splitModel(name);
    const client = build(
      provider ?? settings.LLM_PROVIDER ?? "openai",
      model,
      user.apiKey ?? undefined,
      user.baseUrl ?? undefined,
      options,
    );
    return { ok: true, client, ownKey: true };
  }
  const provider = settings.LLM_PROVIDER;
  if (!provider) return { ok: false, reason: `No LLM is configured: no provider. ${howToConfigureLlm}` };
  if (!name) return { ok: false, reason: `No LLM is configured: no model. ${howToConfigureLlm}` };
  if (!settings.LLM_API_KEY && !settings.LLM_BASE_URL) {
    return { ok: false, reason: `No LLM is configured: no API key. ${howToConfigureLlm}` };
  }
  const refusal = serverModelRefusal(settings, name);
  if (refusal) return { ok: false, reason: `${refusal}.` };
  const client = build(provider, splitModel(name).model, settings.LLM_API_KEY, settings.LLM_BASE_URL, options);
  return { ok: true, client, ownKey: false };
};
