import {
  isStdioServer,
  keepMaskedMcpValues,
  type McpConfig,
  maskMcpConfig,
  mcpConfigSchema,
  OutboundAddressError,
  type OutboundAddressPolicy,
  parseOutboundUrl,
  type ReasoningEffort,
  resolveOutboundAddresses,
  type SecretBox,
  type SecurityAnalyzer,
  type SettingsRequest,
  serverModelRefusal,
  userBaseUrlRefusal,
  ValidationError,
} from "@tern/core";
import { type Database, type StoredUserSettings, userSettingsRepository } from "@tern/db";
import type { Kysely } from "kysely";
import { llmKeyContext, mcpConfigContext } from "./secrets.ts";

/**
 * A user's LLM settings: their model, their own endpoint and key (sealed, write-only),
 * their iteration and budget limits. What the operator allows bounds them: LLM_MODELS for models
 * on the operator's key, LLM_USER_BASE_URLS for where a user's key may be sent.
 */
export interface SettingsDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
  /** LLM_PROVIDER / LLM_MODEL / LLM_MODELS as this process knows them; absent: not checked here (the worker checks). */
  llmModels?: { LLM_PROVIDER?: string | undefined; LLM_MODEL?: string | undefined; LLM_MODELS?: readonly string[] };
  /** LLM_USER_BASE_URLS. */
  userBaseUrls?: readonly string[];
  /** MCP_ALLOW_PRIVATE / MCP_ALLOW_HTTP: where a remote MCP server may be (core/outbound-address.ts, as for webhooks). */
  mcpAddressPolicy?: OutboundAddressPolicy;
  /** MCP_MAX_SERVERS; 0 or absent: no limit. */
  mcpMaxServers?: number;
  /** Name resolution, for tests; the system resolver by default. */
  resolve?: (host: string) => Promise<{ address: string; family: number }[]>;
}

const invalid = (field: string, message: string) =>
  new ValidationError(`${field}: ${message}`, [{ field, in: "json", message }]);

export const getSettings = (deps: Pick<SettingsDeps, "db">, userId: string): Promise<StoredUserSettings> =>
  userSettingsRepository(deps.db).get(userId);

/** Whether the operator's allow-list is known here (the API knows it when LLM_MODELS is set on it). */
const allowListKnown = (deps: SettingsDeps) => (deps.llmModels?.LLM_MODELS?.length ?? 0) > 0;

/**
 * A model the user asks for, refused (422 naming `field`) when it would run on the operator's key
 * and LLM_MODELS does not offer it. A user with their own key or endpoint may use any model.
 */
export const assertModelAllowed = async (
  deps: SettingsDeps,
  userId: string,
  model: string,
  field = "llm_model",
): Promise<void> => {
  if (!allowListKnown(deps)) return;
  const own = await userSettingsRepository(deps.db).get(userId);
  if (own.sealedLlmApiKey || own.llmBaseUrl) return;
  const refusal = serverModelRefusal(deps.llmModels ?? {}, model);
  if (refusal) throw invalid(field, refusal);
};

/**
 * A new mcp_config checked (422 naming the field): the server count, each remote URL by the
 * outbound address rules webhooks follow too (scheme, and every address its name resolves to now;
 * the worker checks again when it connects), values sent back masked replaced by the stored ones.
 * Returns it sealed and masked.
 */
const checkedMcpConfig = async (
  deps: SettingsDeps,
  userId: string,
  config: McpConfig,
  sealedBefore: string | null,
): Promise<{ sealed: string; masked: McpConfig }> => {
  const names = Object.keys(config.mcpServers);
  const max = deps.mcpMaxServers ?? 0;
  if (max > 0 && names.length > max) {
    throw invalid("mcp_config", `at most ${max} MCP servers (MCP_MAX_SERVERS); got ${names.length}`);
  }
  const policy = deps.mcpAddressPolicy ?? { allowPrivate: false, allowHttp: false };
  for (const [name, server] of Object.entries(config.mcpServers)) {
    if (isStdioServer(server)) continue;
    try {
      await resolveOutboundAddresses(parseOutboundUrl(server.url, policy, "MCP"), policy, "MCP", deps.resolve);
    } catch (err) {
      if (err instanceof OutboundAddressError) throw invalid(`mcp_config.mcpServers.${name}.url`, err.message);
      throw err;
    }
  }
  let before: McpConfig | null = null;
  if (sealedBefore) {
    try {
      before = mcpConfigSchema.parse(JSON.parse(deps.secretBox.open(sealedBefore, mcpConfigContext(userId))));
    } catch {
      before = null;
    }
  }
  const kept = keepMaskedMcpValues(config, before);
  if ("unknown" in kept) {
    throw invalid(`mcp_config.mcpServers.${kept.unknown}`, "********** stands for a stored value, and none is stored");
  }
  return {
    sealed: deps.secretBox.seal(JSON.stringify(kept.config), mcpConfigContext(userId)),
    masked: maskMcpConfig(kept.config),
  };
};

/** Applies a change (absent: kept, null: cleared) and returns the settings after it. */
export const updateSettings = async (
  deps: SettingsDeps,
  userId: string,
  change: SettingsRequest,
): Promise<StoredUserSettings> => {
  if (change.llm_base_url) {
    const refusal = await userBaseUrlRefusal(change.llm_base_url, deps.userBaseUrls, deps.resolve);
    if (refusal) throw invalid("llm_base_url", refusal);
  }
  const repo = userSettingsRepository(deps.db);
  const before = await repo.get(userId);
  const ownAfter =
    (change.llm_api_key !== undefined ? change.llm_api_key : before.sealedLlmApiKey) ||
    (change.llm_base_url !== undefined ? change.llm_base_url : before.llmBaseUrl);
  if (change.llm_model && !ownAfter && allowListKnown(deps)) {
    const refusal = serverModelRefusal(deps.llmModels ?? {}, change.llm_model);
    if (refusal) throw invalid("llm_model", refusal);
  }
  const mcpConfig =
    change.mcp_config === undefined || change.mcp_config === null
      ? change.mcp_config
      : await checkedMcpConfig(deps, userId, change.mcp_config, before.sealedMcpConfig);
  await repo.upsert(userId, {
    mcpConfig,
    llmModel: change.llm_model,
    llmBaseUrl: change.llm_base_url,
    sealedLlmApiKey:
      change.llm_api_key === undefined
        ? undefined
        : change.llm_api_key === null
          ? null
          : deps.secretBox.seal(change.llm_api_key, llmKeyContext(userId)),
    maxIterations: change.max_iterations,
    maxBudgetPerTask: change.max_budget_per_task,
    thinkingBudget: change.llm_extended_thinking_budget,
    reasoningEffort: change.llm_reasoning_effort,
    confirmationMode: change.confirmation_mode,
    securityAnalyzer: change.security_analyzer,
  });
  return repo.get(userId);
};

/** The user's settings for a run, the key opened (the worker's side); an unreadable key counts as none. */
export const userLlmForRun = async (
  deps: Pick<SettingsDeps, "db" | "secretBox">,
  userId: string,
): Promise<{
  llm: {
    model: string | null;
    baseUrl: string | null;
    apiKey: string | null;
    thinkingBudget: number | null;
    reasoningEffort: ReasoningEffort | null;
  } | null;
  maxIterations: number | null;
  maxBudgetPerTask: number | null;
  confirmation: { confirmationMode: boolean; securityAnalyzer: SecurityAnalyzer };
}> => {
  const s = await userSettingsRepository(deps.db).get(userId);
  let apiKey: string | null = null;
  if (s.sealedLlmApiKey) {
    try {
      apiKey = deps.secretBox.open(s.sealedLlmApiKey, llmKeyContext(userId));
    } catch {
      apiKey = null;
    }
  }
  const any = s.llmModel || s.llmBaseUrl || apiKey || s.thinkingBudget !== null || s.reasoningEffort;
  return {
    llm: any
      ? {
          model: s.llmModel,
          baseUrl: s.llmBaseUrl,
          apiKey,
          thinkingBudget: s.thinkingBudget,
          reasoningEffort: s.reasoningEffort,
        }
      : null,
    maxIterations: s.maxIterations,
    maxBudgetPerTask: s.maxBudgetPerTask,
    confirmation: { confirmationMode: s.confirmationMode, securityAnalyzer: s.securityAnalyzer },
  };
};

/**
 * The user's MCP config for a run, opened (the worker's side); null when none is set, or it no
 * longer opens or parses (`onUnreadable` says so).
 */
export const userMcpConfigForRun = async (
  deps: Pick<SettingsDeps, "db" | "secretBox">,
  userId: string,
  onUnreadable: (reason: string) => void = () => {},
): Promise<McpConfig | null> => {
  const s = await userSettingsRepository(deps.db).get(userId);
  if (!s.sealedMcpConfig) return null;
  let plain: string;
  try {
    plain = deps.secretBox.open(s.sealedMcpConfig, mcpConfigContext(userId));
  } catch {
    onUnreadable("it does not open under SECRETS_KEY");
    return null;
  }
  // Only the reason, never the error: a parser's message may quote the text, credentials and all.
  const parsed = mcpConfigSchema.safeParse(
    (() => {
      try {
        return JSON.parse(plain);
      } catch {
        return null;
      }
    })(),
  );
  if (!parsed.success) {
    onUnreadable("it is not a valid mcp_config any more");
    return null;
  }
  return parsed.data;
};
