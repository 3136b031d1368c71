import {
  type ApiKey,
  type ApiKeyRecord,
  type Conversation,
  type ConversationRecord,
  errorBodySchema,
  type OwnedSandbox,
  openSessionApiKey,
  type SandboxRecord,
  type SandboxSpec,
  type SandboxSpecImage,
  type SandboxSpecRecord,
  type SecretBox,
  type StartTask,
  type StartTaskRecord,
  toHexId,
  toMetricsSnapshot,
} from "@tern/core";

/**
 * The functions that make the JSON records of responses from domain types. The records' schemas
 * are @tern/core's (apiKeyRecordSchema, startTaskRecordSchema, conversationRecordSchema): the
 * same ones document the routes and type the SDK.
 */
const hexOrNull = (id: string | null): string | null => (id === null ? null : toHexId(id));

/** What the records read of the API's configuration: where the live page and the agent server are. */
export interface RecordUrls {
  publicUrl: string;
  AGENT_SERVER_BASE_URL?: string | undefined;
}

/**
 * `agent_server_url` of a sandbox: the agent-server API this API serves for it (routes/agent-server),
 * `{PUBLIC_URL}/agent/{sandbox_id}`, or under AGENT_SERVER_BASE_URL when a reverse proxy routes it.
 */
const agentServerUrlOf = (urls: RecordUrls, sandboxId: string): string =>
  `${(urls.AGENT_SERVER_BASE_URL ?? `${urls.publicUrl}/agent`).replace(/\/+$/, "")}/${toHexId(sandboxId)}`;

/** The port a URL is reached on: its own, else its scheme's. */
const portOf = (url: string): number => {
  const u = new URL(url);
  return u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
};

export const toApiKeyRecord = (k: ApiKey): ApiKeyRecord => ({
  id: toHexId(k.id),
  name: k.name,
  prefix: k.prefix,
  created_at: k.createdAt,
  expires_at: k.expiresAt,
  last_used_at: k.lastUsedAt,
});

export const toStartTaskRecord = (t: StartTask, urls: RecordUrls): StartTaskRecord => ({
  id: toHexId(t.id),
  created_by_user_id: toHexId(t.userId),
  status: t.status,
  detail: t.detail,
  app_conversation_id: hexOrNull(t.appConversationId),
  sandbox_id: hexOrNull(t.sandboxId),
  // Once the start has a sandbox, its agent server is this API's (the stored column is a fallback).
  agent_server_url: t.sandboxId ? agentServerUrlOf(urls, t.sandboxId) : t.agentServerUrl,
  request: t.request,
  created_at: t.createdAt,
  updated_at: t.updatedAt,
});

export const toConversationRecord = (c: Conversation, urls: RecordUrls, box: SecretBox): ConversationRecord => ({
  id: toHexId(c.id),
  created_by_user_id: toHexId(c.userId),
  title: c.title,
  sandbox_id: hexOrNull(c.sandboxId),
  sandbox_status: c.sandboxStatus,
  execution_status: c.executionStatus,
  // Where a person watches it: the live page (DESIGN.md), as the OpenHands docs example prints it.
  conversation_url: `${urls.publicUrl}/conversations/${toHexId(c.id)}`,
  agent_server_url: c.sandboxId ? agentServerUrlOf(urls, c.sandboxId) : null,
  session_api_key: openSessionApiKey(box, c.id, c.sealedSessionApiKey),
  selected_repository: c.selectedRepository,
  selected_branch: c.selectedBranch,
  git_provider: c.gitProvider,
  llm_model: c.llmModel,
  trigger: c.trigger,
  pr_number: c.prNumber,
  parent_conversation_id: hexOrNull(c.parentConversationId),
  sub_conversation_ids: c.subConversationIds.map(toHexId),
  public: c.public,
  agent_type: c.agentType,
  metrics: toMetricsSnapshot(c.metrics, c.llmModel),
  created_at: c.createdAt,
  updated_at: c.updatedAt,
});

/**
 * OpenHands' SandboxInfo. The session key and exposed URLs are there only while it runs, as
 * OpenHands clears them otherwise. Sandboxes publish no ports: the one URL exposed is its agent
 * server's (AGENT_SERVER), which this API serves, on the port that URL is reached on.
 */
/** A sandbox's session key: its own (made by POST /api/v1/sandboxes), else its conversation's. */
const sessionKeyOf = (s: OwnedSandbox, box: SecretBox): string | null => {
  if (s.sealedSandboxSessionApiKey) return openSessionApiKey(box, s.id, s.sealedSandboxSessionApiKey);
  return s.conversationId ? openSessionApiKey(box, s.conversationId, s.sealedSessionApiKey) : null;
};

export const toSandboxRecord = (s: OwnedSandbox, box: SecretBox, urls: RecordUrls): SandboxRecord => {
  const agentServerUrl = agentServerUrlOf(urls, s.id);
  return {
    id: toHexId(s.id),
    created_by_user_id: hexOrNull(s.userId),
    sandbox_spec_id: s.image,
    status: s.status,
    session_api_key: s.status === "RUNNING" ? sessionKeyOf(s, box) : null,
    exposed_urls:
      s.status === "RUNNING" ? [{ name: "AGENT_SERVER", url: agentServerUrl, port: portOf(agentServerUrl) }] : null,
    created_at: s.createdAt,
  };
};

/** The directory every sandbox's workspace is in (the image's working directory). */
const SANDBOX_WORKING_DIR = "/workspace";

/** OpenHands' SandboxSpecInfo of an image this deployment offers, with its runtime images. */
export const toSandboxSpecRecord = (s: SandboxSpec, images: SandboxSpecImage[] = []): SandboxSpecRecord => ({
  id: s.id,
  command: null,
  created_at: s.createdAt,
  initial_env: {},
  working_dir: SANDBOX_WORKING_DIR,
  added_by_admin: !!s.addedBy,
  runtime_images: images.map((i) => ({
    engine_id: i.engineId,
    state: i.state,
    image: i.image,
    error: i.error,
    log: i.log,
    updated_at: i.updatedAt,
  })),
});

const errorContent = { "application/json": { schema: errorBodySchema } } as const;

/** One error response for the OpenAPI document: the error body, under its own description. */
export const errorResponse = (description: string) => ({ description, content: errorContent }) as const;

/** Error responses every authenticated route may give, for the OpenAPI document. */
export const errorResponses = {
  400: { description: "Malformed request or page_id", content: errorContent },
  401: { description: "No key, or an unknown, revoked or expired one", content: errorContent },
  422: { description: "Validation failed; the message names the field", content: errorContent },
  429: {
    description:
      "Rate limit (code rate_limited) or quota (code quota_exceeded) exceeded; Retry-After says when to try again, " +
      "RateLimit-Limit/-Remaining/-Reset describe the key's budget (also on successful answers)",
    content: errorContent,
  },
} as const;

export const notFoundResponse = {
  404: { description: "Unknown, or not the caller's", content: errorContent },
} as const;

/** Routes a conversation's session key may also call (its own conversation only). */
export const sessionReadableSecurity: Record<string, string[]>[] = [
  { bearerAuth: [] },
  { accessToken: [] },
  { sessionApiKey: [] },
];
