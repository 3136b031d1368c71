import { type ReasoningEffort, reasoningEfforts, type SecurityAnalyzer } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

/** A user's LLM settings as stored: the key sealed. */
export interface StoredUserSettings {
  userId: string;
  llmModel: string | null;
  llmBaseUrl: string | null;
  sealedLlmApiKey: string | null;
  maxIterations: number | null;
  maxBudgetPerTask: number | null;
  /** The MCP config sealed whole (context `settings:<user>:mcp_config`). */
  sealedMcpConfig: string | null;
  /** The MCP config with literal header and env values hidden (core's maskMcpConfig). */
  maskedMcpConfig: unknown | null;
  updatedAt: string | null;
  /** Confirmation mode: off unless the user turns it on; risk judged by the LLM. */
  confirmationMode: boolean;
  securityAnalyzer: SecurityAnalyzer;
  /** Anthropic's extended-thinking budget in tokens (0: none); null: the operator's. */
  thinkingBudget: number | null;
  /** The reasoning effort of the models that take one; null: the operator's (or a value no longer known). */
  reasoningEffort: ReasoningEffort | null;
}

/** What a change sets: absent fields are left as they are, null clears one. */
export interface UserSettingsChange {
  llmModel?: string | null;
  llmBaseUrl?: string | null;
  sealedLlmApiKey?: string | null;
  maxIterations?: number | null;
  maxBudgetPerTask?: number | null;
  confirmationMode?: boolean;
  securityAnalyzer?: SecurityAnalyzer;
  thinkingBudget?: number | null;
  reasoningEffort?: ReasoningEffort | null;
  /** Both or neither: the sealed config and its masked copy. */
  mcpConfig?: { sealed: string; masked: unknown } | null;
}

export const userSettingsRepository = (db: Kysely<Database>) => ({
  /** The user's settings; all null when they never set any. */
  async get(userId: string): Promise<StoredUserSettings> {
    const r = await db.selectFrom("user_settings").selectAll().where("user_id", "=", userId).executeTakeFirst();
    return {
      userId,
      llmModel: r?.llm_model ?? null,
      llmBaseUrl: r?.llm_base_url ?? null,
      sealedLlmApiKey: r?.llm_api_key ?? null,
      maxIterations: r?.max_iterations ?? null,
      maxBudgetPerTask: r?.max_budget_per_task ?? null,
      sealedMcpConfig: r?.mcp_config_sealed ?? null,
      maskedMcpConfig: r?.mcp_config_masked ?? null,
      updatedAt: r?.updated_at ?? null,
      confirmationMode: r?.confirmation_mode ?? false,
      securityAnalyzer: r?.security_analyzer === "none" ? "none" : "llm",
      thinkingBudget: r?.llm_extended_thinking_budget ?? null,
      reasoningEffort: reasoningEfforts.find((e) => e === r?.llm_reasoning_effort) ?? null,
    };
  },

  async upsert(userId: string, change: UserSettingsChange): Promise<void> {
    const set = {
      ...(change.llmModel !== undefined ? { llm_model: change.llmModel } : {}),
      ...(change.llmBaseUrl !== undefined ? { llm_base_url: change.llmBaseUrl } : {}),
      ...(change.sealedLlmApiKey !== undefined ? { llm_api_key: change.sealedLlmApiKey } : {}),
      ...(change.maxIterations !== undefined ? { max_iterations: change.maxIterations } : {}),
      ...(change.maxBudgetPerTask !== undefined ? { max_budget_per_task: change.maxBudgetPerTask } : {}),
      ...(change.confirmationMode !== undefined ? { confirmation_mode: change.confirmationMode } : {}),
      ...(change.securityAnalyzer !== undefined ? { security_analyzer: change.securityAnalyzer } : {}),
      ...(change.thinkingBudget !== undefined ? { llm_extended_thinking_budget: change.thinkingBudget } : {}),
      ...(change.reasoningEffort !== undefined ? { llm_reasoning_effort: change.reasoningEffort } : {}),
      ...(change.mcpConfig !== undefined
        ? {
            mcp_config_sealed: change.mcpConfig?.sealed ?? null,
            mcp_config_masked: change.mcpConfig ? JSON.stringify(change.mcpConfig.masked) : null,
          }
        : {}),
    };
    await db
      .insertInto("user_settings")
      .values({ user_id: userId, ...set })
      .onConflict((oc) => oc.column("user_id").doUpdateSet({ ...set, updated_at: sql<string>`now()` }))
      .execute();
  },

  /** Every sealed LLM key, for a key rotation. */
  async listAllSealed(): Promise<{ userId: string; sealedValue: string }[]> {
    const rows = await db
      .selectFrom("user_settings")
      .select(["user_id", "llm_api_key"])
      .where("llm_api_key", "is not", null)
      .execute();
    return rows.map((r) => ({ userId: r.user_id, sealedValue: r.llm_api_key ?? "" }));
  },

  /** Every sealed MCP config, for a key rotation. */
  async listAllSealedMcpConfigs(): Promise<{ userId: string; sealedValue: string }[]> {
    const rows = await db
      .selectFrom("user_settings")
      .select(["user_id", "mcp_config_sealed"])
      .where("mcp_config_sealed", "is not", null)
      .execute();
    return rows.map((r) => ({ userId: r.user_id, sealedValue: r.mcp_config_sealed ?? "" }));
  },

  async resealMcpConfig(userId: string, from: string, to: string): Promise<boolean> {
    const res = await db
      .updateTable("user_settings")
      .set({ mcp_config_sealed: to })
      .where("user_id", "=", userId)
      .where("mcp_config_sealed", "=", from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  },

  async reseal(userId: string, from: string, to: string): Promise<boolean> {
    const res = await db
      .updateTable("user_settings")
      .set({ llm_api_key: to })
      .where("user_id", "=", userId)
      .where("llm_api_key", "=", from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  },
});

export type UserSettingsRepository = ReturnType<typeof userSettingsRepository>;
