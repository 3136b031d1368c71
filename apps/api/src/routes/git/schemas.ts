import { z } from "@hono/zod-openapi";
import { gitProviders } from "@tern/core";

/** `host[:port]`, or an http(s) URL of a host with nothing after it (a self-hosted GitLab, GitHub Enterprise). */
const hostPattern =
  /^(https?:\/\/)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?\/?$/;

export const createGitProviderSchema = z
  .object({
    provider: z.enum(gitProviders),
    token: z.string().min(1).max(4096).openapi({ description: "Write-only: sealed at rest, never shown again" }),
    host: z
      .string()
      .max(255)
      .regex(hostPattern, "must be a host name, host:port or an http(s) URL of a host")
      .nullable()
      .optional()
      .openapi({
        description: "Self-hosted GitLab or GitHub Enterprise; absent: the deployment's host of the provider",
      }),
  })
  .openapi("CreateGitProvider");

export const gitProviderRecordSchema = z
  .object({
    id: z.string(),
    provider: z.enum(gitProviders),
    host: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi("GitProvider");
