import { z } from "zod";
import { reasoningEfforts } from "../config.ts";
import { securityAnalyzers } from "../confirmation-policy.ts";
import { datetimeSchema, hasUrlScheme, hexIdSchema } from "./formats.ts";
import { mcpConfigSchema } from "./mcp.ts";

/**
 * Users, their secrets and their LLM settings. Write-only values (a secret's value, the
 * LLM key) are in requests only: no response schema has a field that could carry them.
 */

/** A secret's name is the name of the environment variable the agent's commands see. */
export const secretNameSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "must be an environment variable name: letters, digits, _ (not first)")
  .refine((n) => !/^TERN_/i.test(n), "names starting TERN_ are reserved")
  .meta({ example: "NPM_TOKEN" });

/** Largest value of one secret, in UTF-8 bytes (422 past it). */
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;
/** Most secrets one user may keep (422 past it). */
export const MAX_SECRETS_PER_USER = 100;

const secretValueSchema = z.string().min(1).meta({ description: "Write-only; at most 64 KiB" });
const descriptionSchema = z.string().max(1000).nullable().optional();

export const createSecretRequestSchema = z
  .object({ name: secretNameSchema, value: secretValueSchema, description: descriptionSchema })
  .meta({ id: "CreateSecretRequest" });

export const updateSecretRequestSchema = z
  .object({ value: secretValueSchema.optional(), description: descriptionSchema })
  .meta({ id: "UpdateSecretRequest" });

/** A secret as listed (OpenHands' CustomSecretWithoutValueModel): never its value. */
export const secretRecordSchema = z
  .object({
    name: z.string(),
    description: z.string().nullable(),
    created_at: datetimeSchema,
    updated_at: datetimeSchema,
  })
  .meta({ id: "Secret" });

export const secretListSchema = z.object({ custom_secrets: z.array(secretRecordSchema) }).meta({ id: "SecretList" });

export type SecretRecord = z.infer<typeof secretRecordSchema>;

const httpUrl = z
  .string()
  .max(2000)
  .refine((v) => hasUrlScheme(v, ["http:", "https:"]), "must be an http(s) URL");

/** POST /api/v1/settings: fields absent are left as they are; null clears one. */
export const settingsRequestSchema = z
  .object({
    llm_model: z.string().trim().min(1).max(200).nullable().optional(),
    llm_base_url: httpUrl.nullable().optional().meta({ description: "An OpenAI- or Anthropic-compatible endpoint" }),
    llm_api_key: z
      .string()
      .min(1)
      .max(4096)
      .nullable()
      .optional()
      .meta({ description: "Write-only: stored sealed, sent only to llm_base_url or its model's provider" }),
    max_iterations: z.number().int().min(1).max(10_000).nullable().optional(),
    max_budget_per_task: z
      .number()
      .positive()
      .max(1_000_000)
      .nullable()
      .optional()
      .meta({ description: "USD a conversation may spend on the LLM; the run stops when reached" }),
    llm_extended_thinking_budget: z.number().int().min(0).max(10_000_000).nullable().optional().meta({
      description:
        "Anthropic's extended-thinking budget in tokens for the user's conversations (0: no thinking); null: the server's default",
    }),
    llm_reasoning_effort: z.enum(reasoningEfforts).nullable().optional().meta({
      description: "reasoning_effort for the models that take it; null: the server's default",
    }),
    confirmation_mode: z
      .boolean()
      .optional()
      .meta({ description: "Tool calls wait for the user's confirmation as the policy says (default false)" }),
    security_analyzer: z.enum(securityAnalyzers).optional().meta({
      description:
        "`llm`: the model's security_risk decides (HIGH and unknown wait); `none`: every call waits in confirmation mode",
    }),
    mcp_config: mcpConfigSchema
      .nullable()
      .optional()
      .meta({
        description:
          "The user's MCP servers ({mcpServers: {name: {url, headers?, transport?} | {command, args?, env?}}}); " +
          "replaces the stored config whole; a value sent back as ********** keeps the stored one",
      }),
  })
  .meta({ id: "SettingsRequest" });

export type SettingsRequest = z.infer<typeof settingsRequestSchema>;

/** The user's settings as read (OpenHands' GETSettingsModel): the key only as `llm_api_key_set`. */
export const settingsRecordSchema = z
  .object({
    llm_model: z.string().nullable(),
    llm_base_url: z.string().nullable(),
    llm_api_key_set: z.boolean(),
    max_iterations: z.number().int().nullable(),
    max_budget_per_task: z.number().nullable(),
    llm_extended_thinking_budget: z.number().int().nullable(),
    llm_reasoning_effort: z.enum(reasoningEfforts).nullable(),
    confirmation_mode: z.boolean(),
    security_analyzer: z.enum(securityAnalyzers),
    mcp_config: mcpConfigSchema
      .nullable()
      .meta({ description: "Header and env values that are not <secret:NAME> references read as **********" }),
  })
  .meta({ id: "Settings" });

export type SettingsRecord = z.infer<typeof settingsRecordSchema>;

/** OpenHands' UserInfo: the user's settings and its id. */
export const userRecordSchema = settingsRecordSchema
  .extend({
    id: hexIdSchema,
    name: z.string().nullable(),
    is_admin: z.boolean(),
    created_at: datetimeSchema,
  })
  .meta({ id: "UserInfo" });

export type UserRecord = z.infer<typeof userRecordSchema>;

export const createUserRequestSchema = z
  .object({
    name: z.string().trim().min(1).max(200).nullable().optional(),
    is_admin: z.boolean().default(false),
  })
  .meta({ id: "CreateUserRequest" });

/** The answer to creating a user: the user and its first key, shown this once. */
export const createdUserSchema = userRecordSchema
  .extend({
    key: z.string().meta({ description: "The new user's first API key; shown this once only" }),
    key_id: hexIdSchema,
  })
  .meta({ id: "CreatedUser" });
