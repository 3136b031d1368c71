import { z } from "zod";

/**
 * A user's MCP servers, in the `mcpServers` form MCP clients share (Claude Desktop,
 * Cursor, OpenHands' `mcp_config`): `{name: {url, headers?, transport?}}` for a remote server,
 * `{name: {command, args?, env?}}` for a stdio one, which runs inside the conversation's sandbox.
 *
 * Header and env values may name the user's secrets as `<secret:NAME>` (resolved on the worker
 * for each run, masked in everything stored); literal values are sealed at rest with the rest of
 * the config and shown back as `**********`.
 *
 * `confirm: "always"` is ours: every call of the server's tools waits for the user's approval
 * whatever the conversation's confirmation policy (OpenHands has no per-server marking; Cline and
 * Roo Code mark the opposite way, `autoApprove` / `alwaysAllow` lists of tools).
 */

/** A server's name: the prefix of its tools' names (`name__tool`), so no `__` and short. */
export const mcpServerNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$/, "letters, digits, - and single _ (not first or last)")
  .max(32)
  .meta({ example: "github" });

/** What a client reads back for a value that is not a `<secret:NAME>` reference. */
export const MCP_MASKED_VALUE = "**********";

const valueMap = z.record(z.string().min(1).max(200), z.string().max(8192));

/** Whether each of the server's calls waits for the user (`always`) or follows the conversation's policy. */
export const mcpConfirmSchema = z.enum(["always", "policy"]);

const remoteTransport = z.enum(["http", "streamable-http", "shttp", "sse"]);

const remoteServer = z.strictObject({
  url: z.string().min(1).max(2000),
  headers: valueMap.optional(),
  /** `http` (streamable HTTP, the default; `streamable-http` and `shttp` are the same) or `sse` (older servers). */
  transport: remoteTransport.optional(),
  /** The same as `transport`, as Claude Code and VS Code name it; `transport` wins. */
  type: remoteTransport.optional(),
  description: z.string().max(1000).optional(),
  confirm: mcpConfirmSchema.optional(),
  /** OpenHands' field: a disabled server stays configured but is not offered. */
  enabled: z.boolean().optional(),
});

const stdioServer = z.strictObject({
  command: z.string().min(1).max(1000),
  args: z.array(z.string().max(4000)).max(100).optional(),
  env: valueMap.optional(),
  transport: z.literal("stdio").optional(),
  type: z.literal("stdio").optional(),
  description: z.string().max(1000).optional(),
  confirm: mcpConfirmSchema.optional(),
  enabled: z.boolean().optional(),
});

export const mcpServerSchema = z.union([remoteServer, stdioServer]);
export type McpServerConfig = z.infer<typeof mcpServerSchema>;
export type McpRemoteServerConfig = z.infer<typeof remoteServer>;
export type McpStdioServerConfig = z.infer<typeof stdioServer>;

export const isStdioServer = (s: McpServerConfig): s is McpStdioServerConfig => "command" in s;

/** How a server is reached: `stdio`, `sse`, or `http` (streamable HTTP; also when none is named). */
export const mcpTransportOf = (s: McpServerConfig): "stdio" | "sse" | "http" =>
  isStdioServer(s) ? "stdio" : (s.transport ?? s.type) === "sse" ? "sse" : "http";

/** Whether the config names a remote server's transport (else streamable HTTP is tried, then SSE). */
export const mcpTransportNamed = (s: McpRemoteServerConfig): boolean => (s.transport ?? s.type) !== undefined;

/** `mcp_config` of the settings: `{mcpServers: {name: server}}`. */
export const mcpConfigSchema = z
  .strictObject({
    mcpServers: z.record(mcpServerNameSchema, mcpServerSchema),
  })
  .meta({ id: "McpConfig" });
export type McpConfig = z.infer<typeof mcpConfigSchema>;

/** `<secret:NAME>` references in a header or env value. */
export const secretReferencePattern = /<secret:([A-Za-z_][A-Za-z0-9_]{0,127})>/g;

/** A value that names secrets is shown as written; any other value is hidden. */
export const maskedMcpValue = (value: string): string =>
  new RegExp(secretReferencePattern.source).test(value) ? value : MCP_MASKED_VALUE;

/** The config as a client reads it: header and env values that are not secret references hidden. */
export const maskMcpConfig = (config: McpConfig): McpConfig => ({
  mcpServers: Object.fromEntries(
    Object.entries(config.mcpServers).map(([name, s]) => {
      const hide = (m: Record<string, string> | undefined) =>
        m ? Object.fromEntries(Object.entries(m).map(([k, v]) => [k, maskedMcpValue(v)])) : undefined;
      const shown = isStdioServer(s) ? { ...s, env: hide(s.env) } : { ...s, headers: hide(s.headers) };
      return [name, Object.fromEntries(Object.entries(shown).filter(([, v]) => v !== undefined)) as McpServerConfig];
    }),
  ),
});

/**
 * A new config with values sent back as `**********` (a client that read the config and writes
 * it back) replaced by the stored value of the same server and key; null when one has none.
 */
export const keepMaskedMcpValues = (
  next: McpConfig,
  before: McpConfig | null,
): { config: McpConfig } | { unknown: string } => {
  const servers: Record<string, McpServerConfig> = {};
  for (const [name, s] of Object.entries(next.mcpServers)) {
    const old = before?.mcpServers[name];
    const field = isStdioServer(s) ? "env" : "headers";
    const values = (s as Record<string, unknown>)[field] as Record<string, string> | undefined;
    const oldValues = old ? ((old as Record<string, unknown>)[field] as Record<string, string> | undefined) : undefined;
    if (!values) {
      servers[name] = s;
      continue;
    }
    const kept: Record<string, string> = {};
    for (const [k, v] of Object.entries(values)) {
      if (v !== MCP_MASKED_VALUE) kept[k] = v;
      else if (oldValues?.[k] !== undefined) kept[k] = oldValues[k];
      else return { unknown: `${name}.${field}.${k}` };
    }
    servers[name] = { ...s, [field]: kept } as McpServerConfig;
  }
  return { config: { mcpServers: servers } };
};
