import {
  checkedFetch,
  type OutboundAddressPolicy,
  parseOutboundUrl,
  type ReasoningEffort,
  type Resolver,
  resolveOutboundAddresses,
  serverModelRefusal,
  splitModel,
  userBaseUrlAccess,
} from "@tern/core";
import { createAnthropicClient } from "./anthropic.ts";
import { llmFailureOf } from "./context-errors.ts";
import { knownModelFacts, type ModelFacts, unknownModelFacts, vendorBaseUrls } from "./models.ts";
import { createOpenAiClient } from "./openai.ts";
import { withPromptToolCalls } from "./prompt-tools.ts";
import { type RetryPolicy, withRetries } from "./retry.ts";
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
  /** LLM_MAX_OUTPUT_TOKENS: each reply's output limit, over the model table's maximum. */
  LLM_MAX_OUTPUT_TOKENS?: number | undefined;
  /** LLM_RETRY_MAX_WAIT: seconds one LLM call may wait for its retries in all (default 600). */
  LLM_RETRY_MAX_WAIT?: number | undefined;
  /** LLM_THINKING_BUDGET: Anthropic's thinking budget unless the user or the conversation set one; 0: off. */
  LLM_THINKING_BUDGET?: number | undefined;
  /** LLM_REASONING_EFFORT: `reasoning_effort` unless the user or the conversation set one; unset: the provider's default. */
  LLM_REASONING_EFFORT?: ReasoningEffort | undefined;
  /** LLM_NATIVE_TOOL_CALLS: `auto` (the model table says), `on`, or `off` (tools in the prompt). */
  LLM_NATIVE_TOOL_CALLS?: "auto" | "on" | "off" | undefined;
}

/** How much a conversation's model reasons (null: not said here, the next in line decides). */
export interface ReasoningPreferences {
  /** Anthropic's thinking budget in tokens; 0: no thinking. */
  thinkingBudget?: number | null;
  reasoningEffort?: ReasoningEffort | null;
}

/** The LLM settings of the conversation's user (/api/v1/settings), the key opened. */
export interface UserLlmSettings extends ReasoningPreferences {
  model: string | null;
  baseUrl: string | null;
  apiKey: string | null;
}

export interface LlmClientOptions {
  timeoutMs?: number;
  /** Retries' waits: LLM_RETRY_MAX_WAIT's and the backoff's (tests shorten them). */
  retry?: Partial<RetryPolicy>;
  /** Name resolution for a user's endpoint, for tests (a hosts mapping); the system resolver by default. */
  resolve?: Resolver;
}

/** What the run's LLM is, beside its client. */
export interface LlmChoiceFacts {
  /** The model table's facts, or null for a model it does not know (conservative defaults are used). */
  facts: ModelFacts | null;
  /** The output limit each request asks for (null: the server's own default). */
  maxOutputTokens: number | null;
  /** Whether tools are described in the prompt rather than called natively. */
  promptToolCalls: boolean;
}

export type LlmChoice =
  | ({ ok: true; client: LlmClient; ownKey: boolean } & LlmChoiceFacts)
  | { ok: false; reason: string };

/** The default of LLM_RETRY_MAX_WAIT, in seconds. */
export const DEFAULT_RETRY_MAX_WAIT_SECONDS = 600;

export const howToConfigureLlm =
  "Set LLM_PROVIDER (openai or anthropic), LLM_MODEL (e.g. gpt-4o or claude-sonnet-4-5) and LLM_API_KEY " +
  "(or LLM_BASE_URL for an OpenAI-compatible server without keys, such as vLLM or Ollama) in the worker's " +
  "environment, or set your own llm_model and llm_api_key in /api/v1/settings.";

/** A user's endpoint: reached only through the checked client, under the policy its URL earned. */
interface UserEndpoint {
  policy: OutboundAddressPolicy;
}

/** Whether `baseUrl` is OpenAI's own API (none: the SDK's default, which is OpenAI's). */
const isOpenAiApi = (baseUrl: string | undefined) => {
  if (!baseUrl) return true;
  try {
    return new URL(baseUrl).hostname.toLowerCase() === "api.openai.com";
  } catch {
    return false;
  }
};

interface Built extends LlmChoiceFacts {
  client: LlmClient;
}

const build = (
  provider: LlmProvider,
  model: string,
  apiKey: string | undefined,
  baseUrl: string | undefined,
  ctx: { settings: LlmSettings; options: LlmClientOptions; reasoning: Required<ReasoningPreferences> },
  userEndpoint: UserEndpoint | null = null,
): Built => {
  const { settings, options, reasoning } = ctx;
  const facts = knownModelFacts(model);
  const common = {
    model,
    apiKey,
    baseUrl,
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
  let client: LlmClient;
  let maxOutputTokens: number | null;
  // One base URL serves both wires (e.g. a LiteLLM proxy): OpenAI's SDK wants it with /v1,
  // Anthropic's adds /v1 itself.
  if (provider === "anthropic") {
    maxOutputTokens = settings.LLM_MAX_OUTPUT_TOKENS ?? facts?.maxOutput ?? unknownModelFacts.maxOutput;
    client = createAnthropicClient({
      ...common,
      baseUrl: common.baseUrl?.replace(/\/v1\/?$/, ""),
      maxTokens: maxOutputTokens,
      thinkingBudget: facts?.reasoning === "thinking" ? (reasoning.thinkingBudget ?? 0) : 0,
    });
  } else {
    maxOutputTokens = settings.LLM_MAX_OUTPUT_TOKENS ?? facts?.maxOutput ?? null;
    // OpenAI's reasoning models refuse `max_tokens`; other OpenAI-compatible servers may not know its successor.
    const param =
      facts?.vendor === "openai" || (!facts && isOpenAiApi(baseUrl)) ? "max_completion_tokens" : "max_tokens";
    client = createOpenAiClient({
      ...common,
      maxOutput: maxOutputTokens === null ? undefined : { tokens: maxOutputTokens, param },
      reasoningEffort: facts?.reasoning === "effort" ? (reasoning.reasoningEffort ?? undefined) : undefined,
    });
  }
  const native = settings.LLM_NATIVE_TOOL_CALLS ?? "auto";
  const promptToolCalls = native === "off" || (native === "auto" && facts?.tools === false);
  if (promptToolCalls) client = withPromptToolCalls(client);
  if (userEndpoint && baseUrl) client = refusingEarly(client, baseUrl, userEndpoint.policy, options.resolve);
  client = withRetries(client, {
    maxWaitMs: (settings.LLM_RETRY_MAX_WAIT ?? DEFAULT_RETRY_MAX_WAIT_SECONDS) * 1000,
    ...options.retry,
  });
  return { client, facts, maxOutputTokens, promptToolCalls };
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
  async complete(request, signal, hooks) {
    try {
      await resolveOutboundAddresses(parseOutboundUrl(baseUrl, policy, "LLM"), policy, "LLM", resolve);
    } catch (err) {
      throw llmFailureOf(err, null, true);
    }
    return client.complete(request, signal, hooks);
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
  /** The conversation's own reasoning settings, over the user's. */
  conversation: ReasoningPreferences | null = null,
): LlmChoice => {
  const name = llmModel?.trim() || user?.model?.trim() || settings.LLM_MODEL;
  const reasoning: Required<ReasoningPreferences> = {
    thinkingBudget: conversation?.thinkingBudget ?? user?.thinkingBudget ?? settings.LLM_THINKING_BUDGET ?? 0,
    reasoningEffort: conversation?.reasoningEffort ?? user?.reasoningEffort ?? settings.LLM_REASONING_EFFORT ?? null,
  };
  const ctx = { settings, options, reasoning };
  if (user && (user.apiKey || user.baseUrl)) {
    if (!name) return { ok: false, reason: `No LLM is configured: no model. ${howToConfigureLlm}` };
    const { provider, model } = splitModel(name);
    // A Gemini or DeepSeek model on the user's own key goes to its vendor's OpenAI-compatible endpoint.
    const vendorUrl =
      user.apiKey && !user.baseUrl ? vendorBaseUrls[knownModelFacts(model)?.vendor ?? "openai"] : undefined;
    const baseUrl = user.baseUrl ?? vendorUrl ?? null;
    let endpoint: UserEndpoint | null = null;
    if (baseUrl) {
      const access = userBaseUrlAccess(baseUrl, settings.LLM_USER_BASE_URLS);
      if (!access.ok) return { ok: false, reason: `Your LLM settings cannot be used: ${access.reason}.` };
      endpoint = { policy: access.policy };
    }
    const built = build(
      vendorUrl ? "openai" : (provider ?? settings.LLM_PROVIDER ?? "openai"),
      model,
      user.apiKey ?? undefined,
      baseUrl ?? undefined,
      ctx,
      endpoint,
    );
    return { ok: true, ownKey: true, ...built };
  }
  const provider = settings.LLM_PROVIDER;
  if (!provider) return { ok: false, reason: `No LLM is configured: no provider. ${howToConfigureLlm}` };
  if (!name) return { ok: false, reason: `No LLM is configured: no model. ${howToConfigureLlm}` };
  if (!settings.LLM_API_KEY && !settings.LLM_BASE_URL) {
    return { ok: false, reason: `No LLM is configured: no API key. ${howToConfigureLlm}` };
  }
  const refusal = serverModelRefusal(settings, name);
  if (refusal) return { ok: false, reason: `${refusal}.` };
  const built = build(provider, splitModel(name).model, settings.LLM_API_KEY, settings.LLM_BASE_URL, ctx);
  return { ok: true, ownKey: false, ...built };
};

/** What the run says once when its model is not in the model table (a warning event). */
export const unknownModelWarning = (model: string, maxOutputTokens: number | null): string =>
  `The model ${model} is not in tern's model table: its context window, output limit, price and abilities are ` +
  `not known, so conservative defaults are used (output limit ${maxOutputTokens ?? "the server's own"}, ` +
  "no images, no reasoning settings, native tool calls; the history is condensed when the provider says it is " +
  "too long). Set LLM_MAX_OUTPUT_TOKENS, LLM_CONTEXT_WINDOWS and LLM_PRICES to say more.";
