import { toolCatalogue } from "@tern/agent/tools";
import {
  type ConfirmationPolicy,
  ConflictError,
  type Conversation,
  confirmationPolicySchema,
  ForbiddenError,
  isStdioServer,
  issueSessionApiKey,
  type McpConfig,
  type MessageContent,
  maskMcpConfig,
  maskSdkSecrets,
  mcpConfigSchema,
  NotFoundError,
  newId,
  parseId,
  type ReasoningEffort,
  type Resolver,
  readRefusalOf,
  reasoningEfforts,
  type SandboxStatus,
  SDK_MASKED_SECRET,
  sandboxReadError,
  serverModelRefusal,
  userBaseUrlRefusal,
  ValidationError,
} from "@tern/core";
import {
  type AgentServerAgent,
  agentServerConversationsRepository,
  confirmationsRepository,
  conversationsRepository,
  eventsRepository,
  sandboxesRepository,
} from "@tern/db";
import { z } from "zod";
import type { ConversationDeps, ServiceDeps } from "../deps.ts";
import { type Caller, ownedConversation, ownedConversations } from "../ownership.ts";
import { assertQueueReady } from "../queue-availability.ts";
import { assertAgentRunAllowed, assertMessageSize } from "../quotas.ts";
import { pauseConversation } from "./pause.ts";
import { sendMessage } from "./send-message.ts";

/**
 * Conversations on a sandbox's agent-server API: OpenHands' `openhands-agent-server`
 * `POST /api/conversations` (the SDK's StartConversationRequest) mapped onto tern's agent, and the
 * `ConversationInfo` every conversation route answers with. The client names its agent: its LLM
 * (model, base_url, api_key: a key of its own, so LLM_MODELS does not apply and
 * LLM_USER_BASE_URLS does), its tools by name, its MCP servers and its limits. What tern cannot run
 * is refused with a ValidationError naming the field. The key is sealed at rest and never echoed.
 */

/** The agent's tools that OpenHands' agent server names, from the agent's registry: one line each there. */
const agentServerTools = toolCatalogue().flatMap((t) => (t.agentServer ? [{ tool: t.name, ...t.agentServer }] : []));
const byAgentServerName = (tools: typeof agentServerTools): Record<string, string> =>
  Object.fromEntries(tools.flatMap((t) => t.names.map((n) => [n, t.tool])));

/** The agent server's tool names (and the SDK's class names for them) → tern's tool. */
const namedTools = byAgentServerName(agentServerTools.filter((t) => !t.default));

/** The SDK's default tools (AgentBase.include_default_tools) → tern's. */
const defaultTools = byAgentServerName(agentServerTools.filter((t) => t.default));

/** The tools a client may name in StartConversationRequest's agent.tools, by the SDK's names. */
export const agentServerToolNames: readonly string[] = agentServerTools
  .filter((t) => !t.default)
  .map((t) => t.names[0] as string);

/** AgentBase.include_default_tools' default, the SDK's own value (each one of defaultTools). */
const SDK_DEFAULT_TOOLS = ["FinishTool", "ThinkTool"];

/** What an agent-server ConversationInfo shows for a key that was given (pydantic's SecretStr). */
export const MASKED_SECRET = SDK_MASKED_SECRET;

const fieldError = (field: string, message: string) =>
  new ValidationError(`${field}: ${message}`, [{ field, in: "json", message }]);

const nothingSet = (v: unknown) =>
  v === undefined ||
  v === null ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === "object" && !Object.keys(v as object).length);

const contentSchema = z.array(
  z.union([
    z.looseObject({ type: z.literal("text"), text: z.string() }),
    z.looseObject({ type: z.literal("image"), image_urls: z.array(z.string()) }),
  ]),
);

/** The SDK's SendMessageRequest. */
export const agentSendMessageSchema = z.looseObject({
  role: z.enum(["user", "system", "assistant", "tool"]).default("user"),
  content: contentSchema.default([]),
  run: z.boolean().default(false),
});

const llmSchema = z.looseObject({
  model: z.string().trim().min(1),
  base_url: z.string().nullish(),
  api_key: z.string().nullish(),
});

const agentSchema = z.looseObject({
  kind: z.string().optional(),
  llm: llmSchema,
  tools: z.array(z.looseObject({ name: z.string().trim().min(1), params: z.unknown().optional() })).default([]),
  mcp_config: z.record(z.string(), z.unknown()).nullish(),
  include_default_tools: z.array(z.string()).optional(),
  filter_tools_regex: z.string().nullish(),
});

/** StartConversationRequest: what tern reads of it (the rest is checked by `refuseUnrunnable`). */
export const startAgentConversationSchema = z.looseObject({
  agent: z.unknown().optional(),
  agent_settings: z.unknown().optional(),
  agent_profile_id: z.unknown().optional(),
  workspace: z.looseObject({ working_dir: z.string().min(1) }),
  conversation_id: z.string().nullish(),
  parent_conversation_id: z.string().nullish(),
  confirmation_policy: z.unknown().optional(),
  security_analyzer: z.unknown().optional(),
  initial_message: agentSendMessageSchema.nullish(),
  max_iterations: z.number().int().min(1).default(500),
  stuck_detection: z.boolean().default(true),
  secrets: z.record(z.string(), z.unknown()).default({}),
  secrets_encrypted: z.boolean().default(false),
  worktree: z.boolean().default(false),
  client_tools: z.array(z.unknown()).nullish(),
  plugins: z.array(z.unknown()).nullish(),
  hook_config: z.unknown().optional(),
  agent_definitions: z.array(z.unknown()).nullish(),
  title: z.string().max(200).nullish(),
});
export type StartAgentConversationRequest = z.infer<typeof startAgentConversationSchema>;

/** A secret as the SDK sends it: a string, `{value}`, or a StaticSecret; other providers are refused. */
const secretValue = (field: string, v: unknown): string => {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && "value" in v && typeof v.value === "string") {
    const kind = (v as { kind?: unknown }).kind;
    if (kind === undefined || kind === "StaticSecret") return v.value;
  }
  throw fieldError(field, "only static secret values can be used here (a string, or {kind: StaticSecret, value})");
};

export const secretValues = (field: string, secrets: Record<string, unknown>): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [name, v] of Object.entries(secrets)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) throw fieldError(`${field}.${name}`, "is not a valid name");
    out[name] = secretValue(`${field}.${name}`, v);
  }
  return out;
};

const issueMessage = (issue: z.core.$ZodIssue) => `${issue.path.map(String).join(".") || "body"}: ${issue.message}`;

/** A zod failure as the ValidationError a route answers 422 with, naming the field. */
export const validationErrorOf = (prefix: string, error: z.ZodError): ValidationError => {
  const first = error.issues[0];
  const field = [prefix, ...(first?.path ?? []).map(String)].filter(Boolean).join(".");
  return new ValidationError(
    first ? `${field}: ${first.message}` : `${prefix}: invalid`,
    error.issues.map((i) => ({
      field: [prefix, ...i.path.map(String)].filter(Boolean).join("."),
      in: "json",
      message: issueMessage(i),
    })),
  );
};

/** OpenHands' model names through a LiteLLM proxy (`litellm_proxy/openai/gpt-4o`) name the model behind it. */
const ternModelName = (model: string) => model.replace(/^litellm_proxy\//, "");

export interface ResolvedAgent {
  model: string;
  baseUrl: string | null;
  apiKey: string | null;
  tools: string[];
  mcpConfig: McpConfig | null;
  /** The agent as ConversationInfo shows it: every secret the SDK's models mark masked, MCP values hidden. */
  shown: Record<string, unknown>;
}

/** A remote MCP server's URL as shown: query values hidden (a token may ride there). */
const shownMcpUrl = (raw: string): string => {
  try {
    const url = new URL(raw);
    for (const key of [...url.searchParams.keys()]) url.searchParams.set(key, MASKED_SECRET);
    return url.href;
  } catch {
    return MASKED_SECRET;
  }
};

/** A remote server's URL with credentials in it: refused (they would be kept and shown as part of the URL). */
const refuseMcpUrlCredentials = (config: McpConfig) => {
  for (const [name, server] of Object.entries(config.mcpServers)) {
    if (isStdioServer(server)) continue;
    let url: URL | null = null;
    try {
      url = new URL(server.url);
    } catch {
      url = null;
    }
    if (url && (url.username || url.password)) {
      throw fieldError(`agent.mcp_config.${name}.url`, "must not carry credentials; send them in headers");
    }
  }
};

/**
 * The client's agent, or a ValidationError naming what tern cannot run: another agent kind, a tool
 * tern does not have, a tool filter, an MCP config tern cannot read, an LLM endpoint the
 * deployment does not allow (LLM_USER_BASE_URLS), or, on the operator's key, a model outside
 * LLM_MODELS.
 */
export const resolveAgent = async (
  settings: {
    LLM_PROVIDER?: string | undefined;
    LLM_MODEL?: string | undefined;
    LLM_MODELS?: readonly string[];
    LLM_USER_BASE_URLS?: readonly string[];
  },
  raw: unknown,
  resolve?: Resolver,
): Promise<ResolvedAgent> => {
  const parsed = agentSchema.safeParse(raw);
  if (!parsed.success) throw validationErrorOf("agent", parsed.error);
  const agent = parsed.data;
  if (agent.kind !== undefined && agent.kind !== "Agent") {
    throw fieldError("agent.kind", `${agent.kind} cannot run here; only Agent (tern's agent) can`);
  }
  const tools = new Set<string>();
  agent.tools.forEach((t, i) => {
    const name = namedTools[t.name];
    if (!name) {
      throw fieldError(
        `agent.tools[${i}].name`,
        `unknown tool ${t.name}; tern runs ${agentServerToolNames.join(", ")} (and MCP servers in agent.mcp_config)`,
      );
    }
    tools.add(name);
  });
  (agent.include_default_tools ?? SDK_DEFAULT_TOOLS).forEach((n, i) => {
    const name = defaultTools[n];
    if (!name)
      throw fieldError(
        `agent.include_default_tools[${i}]`,
        `unknown default tool ${n}; tern has ${SDK_DEFAULT_TOOLS.join(" and ")}`,
      );
    tools.add(name);
  });
  if (agent.filter_tools_regex)
    throw fieldError("agent.filter_tools_regex", "is not supported; name the tools in agent.tools");
  let mcpConfig: McpConfig | null = null;
  if (agent.mcp_config && Object.keys(agent.mcp_config).length > 0) {
    const given = "mcpServers" in agent.mcp_config ? agent.mcp_config : { mcpServers: agent.mcp_config };
    const mcp = mcpConfigSchema.safeParse(given);
    if (!mcp.success) throw validationErrorOf("agent.mcp_config", mcp.error);
    mcpConfig = mcp.data;
    refuseMcpUrlCredentials(mcpConfig);
  }
  const model = ternModelName(agent.llm.model);
  const apiKey = agent.llm.api_key || null;
  if (apiKey === MASKED_SECRET) {
    throw fieldError("agent.llm.api_key", "is masked; send the key itself (the SDK's expose_secrets)");
  }
  const baseUrl = agent.llm.base_url || null;
  if (baseUrl) {
    const refusal = await userBaseUrlRefusal(baseUrl, settings.LLM_USER_BASE_URLS, resolve);
    if (refusal) throw fieldError("agent.llm.base_url", refusal);
  }
  if (!apiKey && !baseUrl) {
    // The operator's key: its allow-list applies, as to any conversation on it.
    const refusal = serverModelRefusal(settings, model);
    if (refusal) throw fieldError("agent.llm.model", refusal);
  }
  const mcpShown = mcpConfig
    ? Object.fromEntries(
        Object.entries(maskMcpConfig(mcpConfig).mcpServers).map(([name, s]) => [
          name,
          isStdioServer(s) ? s : { ...s, url: shownMcpUrl(s.url) },
        ]),
      )
    : {};
  const shown: Record<string, unknown> = {
    ...agent,
    kind: "Agent",
    tools: agent.tools.map((t) => ({ name: t.name, params: t.params ?? {} })),
    mcp_config: mcpShown,
  };
  // Every field the SDK's models mark as a secret (the LLM's keys and headers, the condensers',
  // the critic's, the context's, the MCP servers'), found by the contract, not by name here.
  return { model, baseUrl, apiKey, tools: [...tools], mcpConfig, shown: maskSdkSecrets(shown, "AgentBase").masked };
};

/** What the request asks that tern cannot do, refused by field name. */
const refuseUnrunnable = (r: StartAgentConversationRequest) => {
  if (r.agent_profile_id != null) throw fieldError("agent_profile_id", "agent profiles are not supported; send agent");
  if (r.agent == null)
    throw fieldError("agent", r.agent_settings != null ? "agent_settings is not supported; send agent" : "is required");
  if (r.secrets_encrypted) throw fieldError("secrets_encrypted", "encrypted secrets cannot be opened here");
  if (r.worktree) throw fieldError("worktree", "git worktrees per conversation are not supported");
  if (!nothingSet(r.client_tools)) throw fieldError("client_tools", "client-executed tools are not supported");
  if (!nothingSet(r.plugins)) throw fieldError("plugins", "plugins are not supported");
  if (!nothingSet(r.hook_config)) throw fieldError("hook_config", "hooks are not supported");
  if (!nothingSet(r.agent_definitions)) throw fieldError("agent_definitions", "sub-agents are not supported");
  if (!r.workspace.working_dir.startsWith("/"))
    throw fieldError("workspace.working_dir", "must be an absolute path in the sandbox");
  if (r.security_analyzer != null) {
    const kind = (r.security_analyzer as { kind?: unknown }).kind;
    if (kind !== "LLMSecurityAnalyzer")
      throw fieldError("security_analyzer", "only LLMSecurityAnalyzer (or none) is supported");
  }
  if (r.initial_message && r.initial_message.role !== "user") throw fieldError("initial_message.role", "must be user");
};

const secretsContext = (conversationId: string) => `agent-server:${conversationId}:secrets`;
const llmKeyContext = (conversationId: string) => `agent-server:${conversationId}:llm_api_key`;
const mcpContext = (conversationId: string) => `agent-server:${conversationId}:mcp_config`;
const agentContext = (conversationId: string) => `agent-server:${conversationId}:agent`;

export type AgentServerDeps = ConversationDeps &
  Pick<ServiceDeps, "llmModels" | "resolve"> & {
    secretBox: NonNullable<ConversationDeps["secretBox"]>;
    llmUserBaseUrls?: readonly string[];
  };

/**
 * The sandbox a route acts on, and whom for (the agent-server mount's AgentSandbox). With
 * `conversationId` (a conversation's own key), that conversation only: the sandbox's others are
 * not found.
 */
export interface SandboxScope {
  sandboxId: string;
  userId: string;
  conversationId?: string;
}

const callerOf = (scope: SandboxScope): Caller => ({
  userId: scope.userId,
  ...(scope.conversationId ? { conversationId: scope.conversationId } : {}),
});

/** The sandbox's conversation, or NotFoundError (another sandbox's is not found either). */
export const sandboxConversation = async (
  deps: Pick<ServiceDeps, "db">,
  scope: SandboxScope,
  rawId: string,
): Promise<Conversation> => {
  const c = await ownedConversation(deps, callerOf(scope), rawId);
  if (c.sandboxId !== scope.sandboxId) throw new NotFoundError("No such conversation");
  return c;
};

/** The sandbox's conversations among `rawIds`, in order; null where unknown or another sandbox's. */
export const sandboxConversations = async (
  deps: Pick<ServiceDeps, "db">,
  scope: SandboxScope,
  rawIds: readonly string[],
): Promise<(Conversation | null)[]> =>
  (await ownedConversations(deps, callerOf(scope), rawIds)).map((c) =>
    c && c.sandboxId === scope.sandboxId ? c : null,
  );

/**
 * POST /api/conversations: the conversation in this sandbox (it exists: no start pipeline), its
 * agent, its first message and, with one, its first run (an initial message always runs, as in
 * OpenHands). A `conversation_id` this sandbox already has answers that one (`created: false`);
 * one taken elsewhere is a ConflictError. A conversation's own key starts none (ForbiddenError):
 * it acts on its conversation, and a start runs on the operator's LLM key unless the client names one.
 */
export const startAgentServerConversation = async (
  deps: AgentServerDeps,
  scope: SandboxScope,
  body: unknown,
): Promise<{ conversation: Conversation; created: boolean }> => {
  if (scope.conversationId) {
    throw new ForbiddenError(
      "A conversation's session key acts on its own conversation; start one with the sandbox's key or an API key",
    );
  }
  const parsed = startAgentConversationSchema.safeParse(body);
  if (!parsed.success) throw validationErrorOf("", parsed.error);
  const request = parsed.data;
  if (request.conversation_id != null) {
    const id = parseId(request.conversation_id);
    if (!id) throw fieldError("conversation_id", "must be a uuid");
    const [existing] = await sandboxConversations(deps, scope, [id]);
    if (existing) return { conversation: existing, created: false };
  }
  refuseUnrunnable(request);
  await assertAgentSandboxLive(deps, scope.sandboxId);
  const agent = await resolveAgent(
    {
      LLM_PROVIDER: deps.llmModels?.LLM_PROVIDER,
      LLM_MODEL: deps.llmModels?.LLM_MODEL,
      LLM_MODELS: deps.llmModels?.LLM_MODELS ?? [],
      LLM_USER_BASE_URLS: deps.llmUserBaseUrls ?? [],
    },
    request.agent,
    deps.resolve,
  );
  const policy =
    request.confirmation_policy === undefined ? null : confirmationPolicySchema.safeParse(request.confirmation_policy);
  if (policy && !policy.success) throw validationErrorOf("confirmation_policy", policy.error);
  const secrets = secretValues("secrets", request.secrets);
  const initial =
    request.initial_message && request.initial_message.content.length > 0 ? request.initial_message : null;
  if (initial) {
    assertMessageSize(initial.content as MessageContent[], deps.limits);
    assertQueueReady(deps);
  }
  let parentId: string | null = null;
  if (request.parent_conversation_id != null) {
    const [parent] = await sandboxConversations(deps, scope, [request.parent_conversation_id]);
    if (!parent) throw fieldError("parent_conversation_id", "no such conversation in this sandbox");
    parentId = parent.id;
  }
  const id = (request.conversation_id && parseId(request.conversation_id)) || newId();
  // Its first run would count against the user's work in progress: refused before it is written.
  if (initial) await assertAgentRunAllowed(deps.db, { id, userId: scope.userId }, deps.limits, { isNew: true });
  const box = deps.secretBox;
  const created = await agentServerConversationsRepository(deps.db).create({
    id,
    userId: scope.userId,
    sandboxId: scope.sandboxId,
    title: request.title ?? null,
    sessionApiKey: issueSessionApiKey(box, id).stored,
    workspaceDir: request.workspace.working_dir,
    parentConversationId: parentId,
    agent: {
      llmModel: agent.model,
      llmBaseUrl: agent.baseUrl,
      sealedLlmApiKey: agent.apiKey ? box.seal(agent.apiKey, llmKeyContext(id)) : null,
      tools: agent.tools,
      sealedMcpConfig: agent.mcpConfig ? box.seal(JSON.stringify(agent.mcpConfig), mcpContext(id)) : null,
      maxIterations: request.max_iterations,
      stuckDetection: request.stuck_detection,
      workingDir: request.workspace.working_dir,
      agent: agent.shown,
      sealedAgent: box.seal(JSON.stringify(request.agent), agentContext(id)),
    },
  });
  if (!created) throw new ConflictError("conversation_id: a conversation with this id exists");
  if (Object.keys(secrets).length > 0) {
    await agentServerConversationsRepository(deps.db).setSecrets(
      id,
      box.seal(JSON.stringify(secrets), secretsContext(id)),
    );
  }
  if (policy?.success) await confirmationsRepository(deps.db).setPolicy(id, policy.data);
  if (initial) {
    await sendMessage(deps, callerOf(scope), id, { content: initial.content as MessageContent[], run: true });
  }
  const conversation = await conversationsRepository(deps.db).get(id);
  if (!conversation) throw new NotFoundError("No such conversation");
  return { conversation, created: true };
};

/** POST /{id}/secrets: the conversation's own secrets, added to (a name given again is replaced). */
export const updateAgentServerSecrets = async (
  deps: Pick<AgentServerDeps, "db" | "secretBox">,
  scope: SandboxScope,
  rawId: string,
  given: Record<string, unknown>,
): Promise<void> => {
  const conversation = await sandboxConversation(deps, scope, rawId);
  const values = secretValues("secrets", given);
  const repo = agentServerConversationsRepository(deps.db);
  const sealed = await repo.sealedSecrets(conversation.id);
  const before = sealed
    ? (JSON.parse(deps.secretBox.open(sealed, secretsContext(conversation.id))) as Record<string, string>)
    : {};
  await repo.setSecrets(
    conversation.id,
    deps.secretBox.seal(JSON.stringify({ ...before, ...values }), secretsContext(conversation.id)),
  );
};

/** What a run takes from the agent its client named (the worker's side); null for other conversations. */
export interface AgentServerRunContext {
  /** `thinkingBudget`, `reasoningEffort`: the client's LLM's `extended_thinking_budget` and `reasoning_effort`. */
  llm: {
    model: string;
    baseUrl: string | null;
    apiKey: string | null;
    thinkingBudget: number | null;
    reasoningEffort: ReasoningEffort | null;
  };
  maxIterations: number;
  tools: string[];
  mcpConfig: McpConfig | null;
  /** The conversation's own secrets (none for a sealed value SECRETS_KEY no longer opens). */
  secrets: Record<string, string>;
}

/** How much the client's LLM reasons (OpenHands' LLM.extended_thinking_budget and reasoning_effort), if it said. */
const clientReasoning = (agent: Record<string, unknown>) => {
  const llm = (agent.llm ?? {}) as { extended_thinking_budget?: unknown; reasoning_effort?: unknown };
  const budget = llm.extended_thinking_budget;
  const effort = llm.reasoning_effort;
  return {
    thinkingBudget: typeof budget === "number" && Number.isInteger(budget) && budget >= 0 ? budget : null,
    reasoningEffort: reasoningEfforts.find((e) => e === effort) ?? null,
  };
};

export const agentServerRunContext = async (
  deps: { db: ServiceDeps["db"]; secretBox: NonNullable<ServiceDeps["secretBox"]> },
  conversationId: string,
  onUnreadable: (what: string) => void = () => {},
): Promise<{ agent: AgentServerRunContext | null; secrets: Record<string, string> }> => {
  const repo = agentServerConversationsRepository(deps.db);
  const [a, sealedSecrets] = await Promise.all([repo.get(conversationId), repo.sealedSecrets(conversationId)]);
  const open = <T>(sealed: string | null, context: string, what: string, read: (s: string) => T): T | null => {
    if (!sealed) return null;
    try {
      return read(deps.secretBox.open(sealed, context));
    } catch {
      onUnreadable(what);
      return null;
    }
  };
  const secrets =
    open(sealedSecrets, secretsContext(conversationId), "secrets", (s) => JSON.parse(s) as Record<string, string>) ??
    {};
  if (!a) return { agent: null, secrets };
  return {
    agent: {
      llm: {
        model: a.llmModel,
        baseUrl: a.llmBaseUrl,
        apiKey: open(a.sealedLlmApiKey, llmKeyContext(conversationId), "llm_api_key", (s) => s),
        ...clientReasoning(a.agent),
      },
      maxIterations: a.maxIterations,
      tools: a.tools,
      mcpConfig: open(a.sealedMcpConfig, mcpContext(conversationId), "mcp_config", (s) =>
        mcpConfigSchema.parse(JSON.parse(s)),
      ),
      secrets,
    },
    secrets,
  };
};

/** `6f1c…` (32 hex or uuid) → the dashed uuid OpenHands' pydantic UUID serialises. */
const dashed = (id: string) => parseId(id) ?? id;

/** tern's tools offered to an app-server conversation, as the agent server names them. */
const defaultAgent = (c: Conversation) => ({
  kind: "Agent",
  llm: { model: c.llmModel ?? "", usage_id: "agent" },
  tools: agentServerToolNames.map((name) => ({ name, params: {} })),
  mcp_config: {},
  include_default_tools: SDK_DEFAULT_TOOLS,
});

/** The agent server's ConversationInfo of a conversation (openhands-agent-server models.py). */
export const conversationInfo = (
  c: Conversation,
  extra: { agent: AgentServerAgent | null; policy: ConfirmationPolicy | null },
): Record<string, unknown> => ({
  id: dashed(c.id),
  workspace: { kind: "LocalWorkspace", working_dir: extra.agent?.workingDir ?? c.workspaceDir },
  persistence_dir: null,
  max_iterations: extra.agent?.maxIterations ?? 500,
  stuck_detection: extra.agent?.stuckDetection ?? true,
  execution_status: c.executionStatus,
  confirmation_policy: extra.policy ?? { kind: "NeverConfirm" },
  security_analyzer: null,
  activated_knowledge_skills: [],
  invoked_skills: [],
  blocked_actions: {},
  blocked_messages: {},
  last_user_message_id: null,
  leaf_event_id: null,
  stats: { usage_to_metrics: {} },
  secret_registry: { secret_sources: {} },
  agent_state: {},
  hook_config: null,
  title: c.title,
  metrics: null,
  created_at: c.createdAt,
  updated_at: c.updatedAt,
  forked_from_conversation_id: null,
  forked_from_event_id: null,
  parent_conversation_id: c.parentConversationId ? dashed(c.parentConversationId) : null,
  sub_conversation_ids: c.subConversationIds.map(dashed),
  tags: {},
  current_model_id: null,
  available_models: [],
  supports_runtime_model_switch: false,
  launched_agent_profile: null,
  // Masked again as it is read: a row written by an older version may hold what is masked now.
  agent: extra.agent ? maskSdkSecrets(extra.agent.agent, "AgentBase").masked : defaultAgent(c),
  client_tools: [],
});

/** ConversationInfo of each conversation (null stays null), with two reads for the lot. */
export const conversationInfos = async (
  deps: Pick<ServiceDeps, "db">,
  conversations: readonly (Conversation | null)[],
): Promise<(Record<string, unknown> | null)[]> => {
  const ids = conversations.filter((c): c is Conversation => c !== null).map((c) => c.id);
  const agents = await agentServerConversationsRepository(deps.db).getMany(ids);
  const policies = new Map(
    await Promise.all(ids.map(async (id) => [id, await confirmationsRepository(deps.db).policy(id)] as const)),
  );
  return conversations.map((c) =>
    c ? conversationInfo(c, { agent: agents.get(c.id) ?? null, policy: policies.get(c.id) ?? null }) : null,
  );
};

/**
 * GET /{id}/agent_final_response: the message of the agent's last `finish` call, or its last
 * message; "" while it has neither.
 */
export const agentFinalResponse = async (deps: Pick<ServiceDeps, "db">, conversationId: string): Promise<string> => {
  const event = await eventsRepository(deps.db).lastAgentAnswer(conversationId);
  if (!event) return "";
  const p = event.payload as {
    action?: { message?: unknown };
    llm_message?: { content?: { type: string; text?: string }[] };
  };
  if (event.kind === "ActionEvent") return typeof p.action?.message === "string" ? p.action.message : "";
  return (p.llm_message?.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text ?? "")
    .join("");
};

/**
 * DELETE /{id} on the agent server: the conversation leaves the sandbox (later reads of it there
 * are 404), its run is stopped and its session key revoked; its record and events are kept, as
 * tern keeps every conversation's. The sandbox stays: it is the agent server's host, and is
 * removed with DELETE /api/v1/sandboxes/{id}, not with one of its conversations.
 */
export const deleteAgentServerConversation = async (
  deps: Pick<ServiceDeps, "db" | "limits">,
  scope: SandboxScope,
  rawId: string,
): Promise<void> => {
  const conversation = await sandboxConversation(deps, scope, rawId);
  await pauseConversation(deps, callerOf(scope), conversation.id);
  const repo = conversationsRepository(deps.db);
  await repo.revokeSessionKey(conversation.id);
  await repo.setSandbox(conversation.id, null);
};

/**
 * The sandbox-state rule of the agent-server routes that need the sandbox live (start, run, a
 * message with `run`, an answer to a confirmation): 409 while the user paused it (or it is still
 * starting), 410 once it is gone (sandbox-state.ts). A sandbox the janitor paused for idleness
 * counts as running: the run resumes it.
 */
export const assertAgentSandboxLive = async (deps: Pick<ServiceDeps, "db">, sandboxId: string): Promise<void> => {
  const sandbox = await sandboxesRepository(deps.db).get(sandboxId);
  if (sandbox?.status === "PAUSED" && sandbox.idlePausedAt) return;
  const refusal = readRefusalOf((sandbox?.status ?? null) as SandboxStatus | null);
  if (refusal) throw sandboxReadError(refusal, sandboxId);
};
