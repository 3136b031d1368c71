import {
  checkedFetch,
  type OutboundAddressPolicy,
  parseOutboundUrl,
  type Resolver,
  resolveOutboundAddresses,
  serverModelRefusal,
  splitModel,
  userBaseUrlAccess,
} from "@tern/core";
import { createAnthropicClient } from "./anthropic.ts";
import { llmFailureOf } from "./context-errors.ts";
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
  /** Name resolution for a user's endpoint, for tests (a hosts mapping); the system resolver by default. */
  resolve?: Resolver;
}

export type LlmChoice = { ok: true; client: LlmClient; ownKey: boolean } | { ok: false; reason: string };

export const howToConfigureLlm =
  "Set LLM_PROVIDER (openai or anthropic), LLM_MODEL (e.g. gpt-4o or claude-sonnet-4-5) and LLM_API_KEY " +
  "(or LLM_BASE_URL for an OpenAI-compatible server without keys, such as vLLM or Ollama) in the worker's " +
  "environment, or set your own llm_model and llm_api_key in /api/v1/settings.";

/** A user's endpoint: reached only through the checked client, under the policy its URL earned. */
interface UserEndpoint {
  policy: OutboundAddressPolicy;
}

const build = (
  provider: LlmProvider,
  model: string,
  apiKey: string | undefined,
  baseUrl: string | undefined,
  options: LlmClientOptions,
  userEndpoint: UserEndpoint | null = null,
): LlmClient => {
  const common = {
    model,
    apiKey,
    baseUrl,
    maxRetries: options.maxRetries ?? 4,
    timeoutMs: options.timeoutMs ?? 600_000,
    ...(userEndpoint
      ? {
          fetch: checkedFetch({
            policy: userEndpoint.policy,
            settings: "LLM",
            resolve: options.resolve,
            maxResponseBytes: MAX_LLM_ANSWER_BYTES,
          }),
          userNamedEndpoint: true,
        }
      : {}),
  };
  // One base URL serves both wires (e.g. a LiteLLM proxy): OpenAI's SDK wants it with /v1,
  // Anthropic's adds /v1 itself.
  const client =
    provider === "anthropic"
      ? createAnthropicClient({
          ...common,
          baseUrl: common.baseUrl?.replace(/\/v1\/?$/, ""),
          maxTokens: options.maxTokens ?? 4096,
        })
      : createOpenAiClient(common);
  return userEndpoint && baseUrl ? refusingEarly(client, baseUrl, userEndpoint.policy, options.resolve) : client;
};

/** The most one answer of a user's endpoint may hold: far past any real completion, short of a flood. */
const MAX_LLM_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * `client`, checking its endpoint's address before each call: a refusal ends the call at once
 * with its reason, rather than after the SDK's retries of what it takes for a connection error.
 * (The checked client looks again when it connects: this is not the guard, only the quick answer.)
 */
const refusingEarly = (
  client: LlmClient,
  baseUrl: string,
  policy: OutboundAddressPolicy,
  resolve: Resolver | undefined,
): LlmClient => ({
  provider: client.provider,
  model: client.model,
  async complete(request, signal) {
    try {
      await resolveOutboundAddresses(parseOutboundUrl(baseUrl, policy, "LLM"), policy, "LLM", resolve);
    } catch (err) {
      throw llmFailureOf(err, null, true);
    }
    return client.complete(request, signal);
  },
});

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
    let endpoint: UserEndpoint | null = null;
    if (user.baseUrl) {
      const access = userBaseUrlAccess(user.baseUrl, settings.LLM_USER_BASE_URLS);
      if (!access.ok) return { ok: false, reason: `Your LLM settings cannot be used: ${access.reason}.` };
      endpoint = { policy: access.policy };
    }
    const { provider, model } = splitModel(name);
    const client = build(
      provider ?? settings.LLM_PROVIDER ?? "openai",
      model,
      user.apiKey ?? undefined,
      user.baseUrl ?? undefined,
      options,
      endpoint,
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
