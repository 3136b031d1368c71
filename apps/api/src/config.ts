import { configFields, parseConfig } from "@tern/core";
import { z } from "zod";

export const apiConfigSchema = z.object({
  PORT: configFields.PORT,
  HOST: configFields.HOST,
  PUBLIC_URL: configFields.PUBLIC_URL,
  DATABASE_URL: configFields.DATABASE_URL,
  REDIS_URL: configFields.REDIS_URL,
  REDIS_PREFIX: configFields.REDIS_PREFIX,
  LOG_LEVEL: configFields.LOG_LEVEL,
  API_KEY_MAX_LIFETIME_DAYS: configFields.API_KEY_MAX_LIFETIME_DAYS,
  CURSOR_SECRET: configFields.CURSOR_SECRET,
});

export type ApiConfig = z.infer<typeof apiConfigSchema>;

export const loadApiConfig = (env: Record<string, string | undefined>): ApiConfig => parseConfig(apiConfigSchema, env);
