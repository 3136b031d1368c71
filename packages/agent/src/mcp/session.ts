import { setMaxListeners } from "node:events";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import {
  checkedFetch,
  isStdioServer,
  type Logger,
  type McpConfig,
  type McpServerConfig,
  maskSecrets,
  mcpTransportNamed,
  mcpTransportOf,
  type Observation,
  OutboundAddressError,
  type OutboundAddressPolicy,
  parseOutboundUrl,
  type Resolver,
  secretReferencePattern,
} from "@tern/core";
import type { SandboxDriver, SandboxRef } from "@tern/sandbox";
import type { ToolDefinition } from "../llm/types.ts";
import { cappedFetch } from "./capped-fetch.ts";
import { SandboxStdioTransport } from "./sandbox-stdio.ts";

/** The operator's MCP settings (README: MCP_*). */
export interface McpSettings {
  MCP_ALLOW_PRIVATE?: boolean;
  MCP_ALLOW_HTTP?: boolean;
  MCP_MAX_SERVERS?: number;
  MCP_MAX_TOOLS?: number;
  MCP_CALL_TIMEOUT_MS?: number;
  MCP_CONNECT_TIMEOUT_MS?: number;
  MCP_STARTUP_TIMEOUT_MS?: number;
  MCP_MAX_RESPONSE_BYTES?: number;
}

const defaults = {
  MCP_MAX_SERVERS: 20,
  MCP_MAX_TOOLS: 200,
  MCP_CALL_TIMEOUT_MS: 120_000,
  MCP_CONNECT_TIMEOUT_MS: 20_000,
  MCP_STARTUP_TIMEOUT_MS: 60_000,
  MCP_MAX_RESPONSE_BYTES: 8 * 1024 * 1024,
} as const;

/**
 * Pages of one server's tools/list read at most: a server that names a next page for ever (empty
 * pages do not count toward MCP_MAX_TOOLS) is read this far and no further.
 */
export const MCP_MAX_LIST_PAGES = 50;

/** Largest JSON schema of one tool's arguments we offer the model, in bytes; a bigger one is left out. */
const MCP_MAX_SCHEMA_BYTES = 32 * 1024;
/** A tool's description is cut to this many characters. */
const MAX_DESCRIPTION_CHARS = 2_000;
/** Times a run starts a dead stdio server (or a remote one whose answer was cut) again; past that its calls fail. */
const MAX_RESTARTS = 5;
/** What providers take as a function name (OpenAI's rule, the strictest). */
const toolNamePattern = /^[a-zA-Z0-9_-]{1,64}$/;

/** How one server of the config fared at the run's start: the `mcp_servers` state update's entries. */
export interface McpServerStatus {
  name: string;
  transport: "http" | "sse" | "stdio";
  status: "ready" | "failed" | "disabled" | "skipped";
  /** Its tools offered to the model. */
  tools: number;
  reason?: string;
  /** Tools of the server not offered, and why (bad name, schema too big, past MCP_MAX_TOOLS). */
  left_out?: { tool: string; reason: string }[];
}

interface ServerHandle {
  name: string;
  config: McpServerConfig;
  transport: McpServerStatus["transport"];
  client: Client | null;
  /** A stdio server whose process ended: started again at its next call. */
  dead: boolean;
  restarts: number;
  /** Why the connection was cut (an answer past MCP_MAX_RESPONSE_BYTES); null: it was not. */
  cut: string | null;
  stdio: SandboxStdioTransport | null;
}

interface ToolEntry {
  server: string;
  tool: string;
  alwaysConfirm: boolean;
  argumentNames: ReadonlySet<string>;
}

export interface McpToolSet {
  /** What the model is offered, beside the built-in tools. */
  definitions: ToolDefinition[];
  status: McpServerStatus[];
  /** Name → value of every header and env value in play, to mask in all that is stored or logged. */
  maskValues: Record<string, string>;
  has(name: string): boolean;
  /**
   * Whether `name` is a tool of a server marked `confirm: "always"`: its calls wait for the user
   * whatever the conversation's confirmation policy (the confirmation check reads this).
   */
  alwaysConfirm(name: string): boolean;
  /**
   * The argument names the tool's own schema declares: a call's `security_risk` / `summary` (added
   * to every tool) are taken off its arguments unless the tool itself declares them.
   */
  argumentNames(name: string): ReadonlySet<string>;
  call(
    name: string,
    args: Record<string, unknown>,
    opts: { signal?: AbortSignal; maxOutputBytes: number },
  ): Promise<McpCallOutcome>;
  close(): Promise<void>;
}

interface McpCallOutcome {
  text: string;
  isError: boolean;
  observation: Observation;
}

export interface McpConnectDeps {
  sandboxes: Pick<SandboxDriver, "exec" | "openProcess">;
  /** The conversation's sandbox, where stdio servers run; null: none (they fail, the rest go on). */
  sandboxRef: SandboxRef | null;
  workspaceDir: string;
  settings: McpSettings;
  /** The user's secrets: what `<secret:NAME>` in a header or env value stands for. */
  secrets: Record<string, string>;
  logger: Logger;
  /** Name resolution, for tests; the system resolver by default. */
  resolve?: Resolver;
  /**
   * The run's stop (the user's interrupt or pause, the worker's shutdown): start-up ends at once, every
   * server still starting is reported failed and stopped.
   */
  signal?: AbortSignal | undefined;
}

/** `value` with each `<secret:NAME>` replaced by the secret; throws naming a secret that is not set. */
const resolveSecretRefs = (value: string, secrets: Record<string, string>): string =>
  value.replace(new RegExp(secretReferencePattern.source, "g"), (_m, name: string) => {
    const v = secrets[name];
    if (v === undefined) throw new Error(`it names the secret ${name}, which is not set`);
    return v;
  });

const resolveMap = (m: Record<string, string> | undefined, secrets: Record<string, string>) =>
  Object.fromEntries(Object.entries(m ?? {}).map(([k, v]) => [k, resolveSecretRefs(v, secrets)]));

const withTimeout = async <T>(work: Promise<T>, ms: number, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
};

/** Start-up stopped, by the run's deadline for it or by the run's stop: the reason says which. */
class StartupStopped extends Error {}

/** `work`, or a StartupStopped rejection as soon as `signal` aborts (at once if it has). */
const untilStopped = async <T>(work: Promise<T>, signal: AbortSignal, reason: () => string): Promise<T> => {
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        onAbort = () => reject(new StartupStopped(reason()));
        if (signal.aborted) onAbort();
        else signal.addEventListener("abort", onAbort, { once: true });
      }),
    ]);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
};

const transportOf = (s: McpServerConfig): McpServerStatus["transport"] => mcpTransportOf(s);

/** Image types the providers take, and the largest image passed on (Anthropic refuses more than 5 MB). */
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const MAX_IMAGE_BASE64 = Math.ceil((5 * 1024 * 1024 * 4) / 3);

/** An image block as a data: URL the model is shown; null when its type or size cannot be. */
const imageUrlOf = (b: { data?: unknown; mimeType?: unknown }): string | null =>
  typeof b.data === "string" &&
  b.data.length <= MAX_IMAGE_BASE64 &&
  /^[A-Za-z0-9+/=\s]*$/.test(b.data) &&
  typeof b.mimeType === "string" &&
  IMAGE_TYPES.has(b.mimeType.toLowerCase())
    ? `data:${b.mimeType.toLowerCase()};base64,${b.data.replace(/\s+/g, "")}`
    : null;

/**
 * What a tool's result gives the model: its text blocks, its images (passed on as images), other
 * blocks named; the text cut at `max` bytes.
 */
const resultText = (content: unknown, max: number): { text: string; cut: number; images: string[] } => {
  const blocks = Array.isArray(content)
    ? (content as {
        type?: string;
        text?: string;
        data?: unknown;
        mimeType?: unknown;
        resource?: { text?: string; uri?: string };
      }[])
    : [];
  const images: string[] = [];
  const parts = blocks.map((b) => {
    if (b.type === "text" && typeof b.text === "string") return b.text;
    if (b.type === "resource" && typeof b.resource?.text === "string") return b.resource.text;
    // An ImageContent block holds up to 20 images.
    const image = b.type === "image" && images.length < 20 ? imageUrlOf(b) : null;
    if (image) {
      images.push(image);
      return `[image ${images.length}, shown below]`;
    }
    return `[${b.type ?? "unknown"} content${b.resource?.uri ? ` ${b.resource.uri}` : ""} not shown]`;
  });
  const text = parts.join("\n");
  const bytes = Buffer.byteLength(text);
  if (bytes <= max) return { text, cut: 0, images };
  return {
    images,
    text: Buffer.from(text)
      .subarray(0, max)
      .toString("utf8")
      .replace(/\uFFFD+$/, ""),
    cut: bytes - max,
  };
};

/**
 * Connects to the user's MCP servers for one run: remote ones from the worker with the
 * official SDK over streamable HTTP or SSE, each request through `checkedFetch` (the address
 * checked and pinned at connect time); stdio ones inside the conversation's sandbox. A server that
 * cannot be reached, lists no tools or speaks malformed JSON-RPC is left out with its reason in
 * `status`; nothing here throws for one server's fault.
 */
export const connectMcpServers = async (config: McpConfig, deps: McpConnectDeps): Promise<McpToolSet> => {
  const settings = {
    ...defaults,
    ...Object.fromEntries(Object.entries(deps.settings).filter(([, v]) => v !== undefined)),
  };
  const policy: OutboundAddressPolicy = {
    allowPrivate: deps.settings.MCP_ALLOW_PRIVATE ?? false,
    allowHttp: deps.settings.MCP_ALLOW_HTTP ?? false,
  };
  const fetch = checkedFetch({ policy, settings: "MCP", resolve: deps.resolve });
  const maskValues: Record<string, string> = {};
  const handles = new Map<string, ServerHandle>();
  const status: McpServerStatus[] = [];

  /** Starts `h`'s client; `signal` stops it (its requests are cancelled, its transport closed by the caller). */
  const startClient = async (h: ServerHandle, signal: AbortSignal | undefined): Promise<Client> => {
    const client = new Client({ name: "tern", version: "0.1.0" });
    // Held at once, so that a start-up stopped midway can close what it opened.
    h.client = client;
    const connectOpts = { timeout: settings.MCP_CONNECT_TIMEOUT_MS, ...(signal ? { signal } : {}) };
    const s = h.config;
    if (isStdioServer(s)) {
      if (!deps.sandboxRef) throw new Error("the conversation has no sandbox to run it in");
      const transport = new SandboxStdioTransport({
        sandbox: deps.sandboxes,
        sandboxRef: deps.sandboxRef,
        server: h.name,
        command: s.command,
        args: s.args ?? [],
        env: resolveMap(s.env, deps.secrets),
        cwd: deps.workspaceDir,
      });
      h.stdio = transport;
      h.dead = false;
      transport.onclose = () => {
        h.dead = true;
      };
      try {
        await withTimeout(client.connect(transport, connectOpts), settings.MCP_CONNECT_TIMEOUT_MS, "connecting");
      } catch (err) {
        await client.close().catch(() => undefined);
        const tail = transport.stderrTail.trim();
        const message = transport.malformed ?? (err as Error).message;
        throw new Error(tail ? `${message} (stderr: ${tail.slice(-500)})` : message);
      }
      return client;
    }
    const url = parseOutboundUrl(s.url, policy, "MCP");
    const headers = resolveMap(s.headers, deps.secrets);
    h.dead = false;
    h.cut = null;
    // An answer past the cap ends the connection: the SDK would wait on a broken event stream, so
    // its requests are failed by closing the client; the next call connects again.
    const capped = cappedFetch(fetch, settings.MCP_MAX_RESPONSE_BYTES, (err) => {
      h.cut = err.message;
      h.dead = true;
      void client.close().catch(() => undefined);
    });
    const open = async (kind: "http" | "sse"): Promise<void> => {
      const transport: Transport =
        kind === "sse"
          ? new SSEClientTransport(url, { fetch: capped, requestInit: { headers } })
          : new StreamableHTTPClientTransport(url, { fetch: capped, requestInit: { headers } });
      await withTimeout(client.connect(transport, connectOpts), settings.MCP_CONNECT_TIMEOUT_MS, "connecting");
    };
    if (mcpTransportOf(s) === "sse") await open("sse");
    else if (mcpTransportNamed(s)) await open("http");
    else {
      // No transport named: streamable HTTP, then SSE for an older server (the spec's fallback).
      try {
        await open("http");
      } catch (err) {
        if (err instanceof OutboundAddressError) throw err;
        await client.close().catch(() => undefined);
        try {
          await open("sse");
        } catch {
          throw err;
        }
      }
    }
    return client;
  };

  const servers = Object.entries(config.mcpServers);
  const considered = servers.slice(0, settings.MCP_MAX_SERVERS);
  // One deadline for the start-up of every server of the run (connect, initialize, list), and the
  // run's stop: past either, a server still starting is left out, its process stopped.
  const startupMs = settings.MCP_STARTUP_TIMEOUT_MS;
  const deadline = AbortSignal.timeout(startupMs);
  const startup = deps.signal ? AbortSignal.any([deps.signal, deadline]) : deadline;
  // The SDK adds a listener to it for each request of the start-up and keeps it: a bounded number
  // (initialize and at most MCP_MAX_LIST_PAGES pages a server), not a leak to warn of.
  setMaxListeners((MCP_MAX_LIST_PAGES + 2) * Math.max(1, considered.length), startup);
  const stoppedReason = () =>
    deps.signal?.aborted
      ? "the run was stopped while the server was starting"
      : `it did not start within MCP_STARTUP_TIMEOUT_MS (${startupMs} ms)`;
  const stop = async (h: ServerHandle) => {
    await h.client?.close().catch(() => undefined);
  };
  /** Connects `h` and reads its tools, page by page, within MCP_MAX_TOOLS and MCP_MAX_LIST_PAGES. */
  const start = async (h: ServerHandle) => {
    const client = await startClient(h, startup);
    const tools = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, {
        timeout: settings.MCP_CONNECT_TIMEOUT_MS,
        signal: startup,
      });
      pages++;
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && tools.length <= settings.MCP_MAX_TOOLS && pages < MCP_MAX_LIST_PAGES);
    if (cursor && tools.length === 0) {
      throw new Error(`its tools/list named a next page ${MCP_MAX_LIST_PAGES} times and listed no tools`);
    }
    return tools;
  };
  const connected = await Promise.all(
    considered.map(async ([name, s]) => {
      const transport = transportOf(s);
      if (s.enabled === false) return { name, s, transport, status: "disabled" as const };
      const h: ServerHandle = {
        name,
        config: s,
        transport,
        client: null,
        dead: false,
        restarts: 0,
        stdio: null,
        cut: null,
      };
      try {
        // Every value in play is masked, whether or not it came from a secret.
        const values = isStdioServer(s) ? resolveMap(s.env, deps.secrets) : resolveMap(s.headers, deps.secrets);
        // (A value that is one secret whole is masked under that secret's own name.)
        const secretValues = new Set(Object.values(deps.secrets));
        for (const [k, v] of Object.entries(values)) if (!secretValues.has(v)) maskValues[`mcp:${name}:${k}`] = v;
        const starting = start(h);
        const tools = await untilStopped(starting, startup, stoppedReason).catch((err: unknown) => {
          if (err instanceof StartupStopped) {
            // Stopped now, and again once the start settles (a process whose exec was under way);
            // the run does not wait for either.
            void stop(h);
            void starting.then(
              () => stop(h),
              () => stop(h),
            );
          }
          throw err;
        });
        handles.set(name, h);
        return { name, s, transport, status: "ready" as const, tools };
      } catch (err) {
        if (!(err instanceof StartupStopped)) await stop(h);
        const reason = h.cut ?? ((err as Error).message || String(err));
        return { name, s, transport, status: "failed" as const, reason };
      }
    }),
  );
  const entries = new Map<string, ToolEntry>();
  const definitions: ToolDefinition[] = [];
  for (const c of connected) {
    if (c.status !== "ready") {
      status.push({
        name: c.name,
        transport: c.transport,
        status: c.status,
        tools: 0,
        ...("reason" in c ? { reason: c.reason } : {}),
      });
      continue;
    }
    const leftOut: { tool: string; reason: string }[] = [];
    let offered = 0;
    for (const t of c.tools) {
      const name = `${c.name}__${t.name}`;
      const schemaBytes = Buffer.byteLength(JSON.stringify(t.inputSchema ?? {}));
      if (!toolNamePattern.test(name))
        leftOut.push({
          tool: t.name,
          reason: `${name} is not a valid tool name (letters, digits, _ and -, at most 64)`,
        });
      else if (entries.has(name)) leftOut.push({ tool: t.name, reason: "listed twice" });
      else if (schemaBytes > MCP_MAX_SCHEMA_BYTES)
        leftOut.push({ tool: t.name, reason: `its schema is ${schemaBytes} bytes (at most ${MCP_MAX_SCHEMA_BYTES})` });
      else if (definitions.length >= settings.MCP_MAX_TOOLS)
        leftOut.push({ tool: t.name, reason: `past MCP_MAX_TOOLS (${settings.MCP_MAX_TOOLS})` });
      else {
        const properties = (t.inputSchema as { properties?: Record<string, unknown> }).properties ?? {};
        entries.set(name, {
          server: c.name,
          tool: t.name,
          alwaysConfirm: c.s.confirm === "always",
          argumentNames: new Set(Object.keys(properties)),
        });
        definitions.push({
          name,
          description: `${(t.description ?? t.title ?? t.name).slice(0, MAX_DESCRIPTION_CHARS)} (MCP server ${c.name})`,
          parameters: { ...(t.inputSchema as Record<string, unknown>), type: "object" },
        });
        offered++;
      }
    }
    status.push({
      name: c.name,
      transport: c.transport,
      status: offered > 0 ? "ready" : "failed",
      tools: offered,
      ...(offered === 0
        ? { reason: c.tools.length === 0 ? "it lists no tools" : "none of its tools can be offered" }
        : {}),
      ...(leftOut.length ? { left_out: leftOut.slice(0, 20) } : {}),
    });
  }
  for (const [name, s] of servers.slice(settings.MCP_MAX_SERVERS)) {
    status.push({
      name,
      transport: transportOf(s),
      status: "skipped",
      tools: 0,
      reason: `past MCP_MAX_SERVERS (${settings.MCP_MAX_SERVERS})`,
    });
  }
  // Masked as the run's events are: a reason may quote a header (an error echoing a request).
  for (const s of status) if (s.reason) s.reason = maskSecrets(s.reason, { ...deps.secrets, ...maskValues });

  const observation = (name: string, text: string, isError: boolean, images: string[] = []): McpCallOutcome => ({
    text,
    isError,
    observation: {
      kind: "MCPToolObservation",
      tool_name: name,
      content: [{ type: "text", text }, ...(images.length ? [{ type: "image" as const, image_urls: images }] : [])],
      is_error: isError,
    },
  });

  const call: McpToolSet["call"] = async (name, args, opts) => {
    const entry = entries.get(name);
    const h = entry ? handles.get(entry.server) : undefined;
    if (!entry || !h) return observation(name, `The MCP tool ${name} is not available in this run.`, true);
    if (h.dead || !h.client) {
      if (h.restarts >= MAX_RESTARTS) {
        return observation(name, `The MCP server ${h.name} is not running; its tools cannot be called now.`, true);
      }
      h.restarts++;
      deps.logger.warn(
        { mcp_server: h.name, restarts: h.restarts, reason: h.cut ?? "its process ended" },
        "MCP server connection ended; starting it again",
      );
      await h.client?.close().catch(() => undefined);
      try {
        h.client = await startClient(h, opts.signal);
      } catch (err) {
        h.client = null;
        return observation(
          name,
          `The MCP server ${h.name} could not be started again: ${(err as Error).message}`,
          true,
        );
      }
    }
    try {
      const result = await h.client.callTool({ name: entry.tool, arguments: args }, undefined, {
        timeout: settings.MCP_CALL_TIMEOUT_MS,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      const { text, cut, images } = resultText(result.content, opts.maxOutputBytes);
      const shown = cut > 0 ? `${text}\n[Output was cut: ${cut} more bytes were left out.]` : text;
      return observation(name, shown || "(no output)", result.isError === true, images);
    } catch (err) {
      // Stopped (interrupt, shutdown): the server was told to cancel. The result says so rather
      // than leave the call pending: a later run would call the server again.
      if (opts.signal?.aborted)
        return observation(name, `The call of ${entry.tool} was stopped before it answered.`, true);
      const timedOut = err instanceof McpError && err.code === ErrorCode.RequestTimeout;
      // The message only, masked: a server's error may echo what it was sent, headers and all.
      // An answer cut at the cap closed the connection: that, not the closing, is why it failed.
      const cause = h.cut ?? (err as Error).message ?? String(err);
      const message = maskSecrets(cause, { ...deps.secrets, ...maskValues });
      deps.logger.warn(
        { error: message, mcp_server: h.name, tool: entry.tool, timed_out: timedOut },
        "MCP tool call failed",
      );
      if (timedOut && h.transport === "stdio") {
        // A hung server would hang every later call: the next one starts it again.
        h.dead = true;
        await h.stdio?.close().catch(() => undefined);
      }
      const why = timedOut
        ? `did not answer within ${Math.round(settings.MCP_CALL_TIMEOUT_MS / 1000)} seconds`
        : `failed: ${cause}`;
      return observation(name, `The MCP tool ${entry.tool} of server ${h.name} ${why}.`, true);
    }
  };

  return {
    definitions,
    status,
    maskValues,
    has: (name) => entries.has(name),
    alwaysConfirm: (name) => entries.get(name)?.alwaysConfirm ?? false,
    argumentNames: (name) => entries.get(name)?.argumentNames ?? new Set(),
    call,
    close: async () => {
      await Promise.all([...handles.values()].map((h) => h.client?.close().catch(() => undefined)));
    },
  };
};
