import { mcpConfigSchema, type SettingsRecord } from "@tern/core";
import type { StoredUserSettings } from "@tern/services";

/** The settings as a client reads them: the key only as whether one is set. */
export const toSettingsRecord = (s: StoredUserSettings): SettingsRecord => ({
  llm_model: s.llmModel,
  llm_base_url: s.llmBaseUrl,
  llm_api_key_set: s.sealedLlmApiKey !== null,
  max_iterations: s.maxIterations,
  max_budget_per_task: s.maxBudgetPerTask,
  llm_extended_thinking_budget: s.thinkingBudget,
  llm_reasoning_effort: s.reasoningEffort,
  confirmation_mode: s.confirmationMode,
  security_analyzer: s.securityAnalyzer,
  mcp_config: s.maskedMcpConfig ? mcpConfigSchema.parse(s.maskedMcpConfig) : null,
});
