import type { ColumnType, Generated, JSONColumnType } from "kysely";

/** Timestamps come back as ISO 8601 UTC strings with microseconds (see connection.ts). */
type Timestamp = ColumnType<string, string | Date | undefined, string | Date>;
type NullableTimestamp = ColumnType<string | null, string | Date | null | undefined, string | Date | null>;
type Json<T extends object | null> = JSONColumnType<T, string, string>;

interface UsersTable {
  id: string;
  is_admin: Generated<boolean>;
  /** A label (migration 0030). */
  name: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: Timestamp;
}

/** A user's secrets (migration 0030): `value` sealed by the secret box, never in clear. */
interface UserSecretsTable {
  user_id: string;
  name: string;
  description: string | null;
  value: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** A user's LLM settings (migration 0030): `llm_api_key` sealed. */
interface UserSettingsTable {
  user_id: string;
  llm_model: string | null;
  llm_base_url: string | null;
  llm_api_key: string | null;
  max_iterations: number | null;
  max_budget_per_task: number | null;
  /** The MCP config sealed (migration 0110). */
  mcp_config_sealed: string | null;
  /** The MCP config with its literal header and env values hidden: what clients read. */
  mcp_config_masked: unknown | null;
  updated_at: Timestamp;
  /** Confirmation mode (migration 0100). */
  confirmation_mode: Generated<boolean>;
  security_analyzer: Generated<string>;
  /** The user's reasoning settings (migration 0710). */
  llm_extended_thinking_budget: number | null;
  llm_reasoning_effort: string | null;
}

/** A conversation's own confirmation policy, overriding its user's settings (migration 0100). */
interface ConversationConfirmationPoliciesTable {
  conversation_id: string;
  policy: ColumnType<unknown, string, string>;
  updated_at: Generated<string>;
}

/** The start request's `secrets`, sealed (migration 0030). */
interface StartTaskSecretsTable {
  start_task_id: string;
  name: string;
  value: string;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  name: string | null;
  prefix: string;
  /** SHA-256 of the key, hex. The key itself is never stored. */
  key_hash: string;
  created_at: Timestamp;
  expires_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
}

export interface StartTasksTable {
  id: string;
  user_id: string;
  status: string;
  detail: string | null;
  app_conversation_id: string | null;
  sandbox_id: string | null;
  agent_server_url: string | null;
  request: Json<Record<string, unknown>>;
  attempt: Generated<number>;
  stage_durations: ColumnType<Record<string, number>, string | undefined, string>;
  /** Output of .openhands/setup.sh, capped (migration 0003). */
  setup_output: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * Each stage the task entered, with its time (migration 0300): `[{status, at}]`; a stage whose result
   * was known ahead (a repository snapshot recorded it) carries `detail`, what it was.
   */
  stage_history: ColumnType<{ status: string; at: string; detail?: string }[], string | undefined, string>;
  /** 'sandbox': the task makes a sandbox without a conversation (migration 0230). */
  kind: ColumnType<string, string | undefined, string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ConversationsTable {
  id: string;
  user_id: string;
  start_task_id: string | null;
  title: string | null;
  sandbox_id: string | null;
  execution_status: Generated<string>;
  /** Plaintext of keys made before migration 0090, until the api seals them at its start; else null. */
  session_api_key: ColumnType<string | null, string | null | undefined, string | null>;
  /** The session key sealed in the secret box (migration 0090); null once revoked. */
  session_api_key_sealed: ColumnType<string | null, string | null | undefined, string | null>;
  /** SHA-256 (hex) of the session key: what a request's key is looked up by (migration 0031). */
  session_api_key_hash: ColumnType<string | null, string | null | undefined, string | null>;
  /** Set when the conversation is deleted: the session key authenticates nothing from then on. */
  session_revoked_at: NullableTimestamp;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: string | null;
  llm_model: string | null;
  metrics: ColumnType<Record<string, number>, string | undefined, string>;
  skills: ColumnType<unknown[], string | undefined, string>;
  /** What SETTING_UP_GIT_HOOKS installed, in OpenHands' hook shape (migration 0021). */
  hooks: ColumnType<unknown[], string | undefined, string>;
  workspace_dir: string;
  last_seq: Generated<number>;
  last_event_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** The agent run holding the conversation's run lock (migration 0004). */
  active_run_id: Generated<string | null>;
  run_attempt: Generated<number>;
  /** OpenHands' start fields, stored and echoed (migration 0060). */
  trigger: ColumnType<string | null, string | null | undefined, string | null>;
  pr_number: ColumnType<number[], string | undefined, string>;
  parent_conversation_id: ColumnType<string | null, string | null | undefined, string | null>;
  public: ColumnType<boolean | null, boolean | null | undefined, boolean | null>;
  agent_type: Generated<string>;
}

/** Messages sent to a start task before READY, delivered in order at READY (migration 0060). */
interface PendingMessagesTable {
  id: string;
  start_task_id: string;
  content: Json<unknown[]>;
  created_at: Timestamp;
}

export interface SandboxesTable {
  id: string;
  /** The owner: its start task's user (migration 0020); set by the repository from the task. */
  user_id: ColumnType<string | null, string | null | undefined, string | null>;
  start_task_id: string | null;
  conversation_id: string | null;
  /** Fixed per owner and unique: a second create of the same name adopts the first sandbox. */
  name: string;
  /** The driver's reference to the sandbox, opaque here; null until `create` gave it back. */
  ref: string | null;
  status: string;
  image: string;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** Set while the janitor holds the sandbox paused for idleness (migration 0050). */
  idle_paused_at: NullableTimestamp;
  /** The engine holding it, for drivers with affinity (migration 0070); null otherwise. */
  engine_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Marked MISSING because its engine was lost (migration 0070). */
  engine_lost_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** A sandbox made by POST /api/v1/sandboxes: its own session key, hashed and sealed (migration 0230). */
  session_api_key_hash: ColumnType<string | null, string | null | undefined, string | null>;
  session_api_key_sealed: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Each sandbox engine's last sign of life, from its workers' heartbeat (migration 0070). */
interface EnginesTable {
  id: string;
  first_seen_at: Timestamp;
  last_seen_at: Timestamp;
  lost_at: NullableTimestamp;
}

interface EventsTable {
  id: string;
  conversation_id: string;
  seq: number;
  kind: string;
  source: string;
  timestamp: Timestamp;
  payload: Json<Record<string, unknown>>;
}

/**
 * One row per run of the agent, from the transaction that asked for it (status `queued`) until it
 * ends (`ended_at`): its Redis job is a copy (migration 0400).
 */
interface AgentRunsTable {
  id: string;
  conversation_id: string;
  /** `queued` until a worker takes it; then the conversation's execution status; `skipped` when there was nothing to run. */
  status: string;
  attempts: Generated<number>;
  requested_at: Timestamp;
  /** The engine whose queue the run's job goes to (null: the shared queue). */
  engine_id: string | null;
  started_at: NullableTimestamp;
  ended_at: NullableTimestamp;
}

/** Secrets the deployment's processes share, generated once (migration 0022). */
interface DeploymentSecretsTable {
  name: string;
  value: string;
  created_at: Timestamp;
}

/** The sandbox images this deployment has offered, and since when (migration 0023). */
interface SandboxSpecsTable {
  id: string;
  created_at: Timestamp;
  /** The admin who named it (POST /api/v1/sandbox-specs); null: an image of the configuration. */
  added_by: ColumnType<string | null, string | null | undefined, string | null>;
}

/** The runtime image an engine made of a spec's base image (migration 0700). */
interface SandboxSpecImagesTable {
  spec_id: string;
  engine_id: string;
  state: "building" | "ready" | "failed";
  image: string | null;
  base_id: string | null;
  tools_version: string | null;
  log: Generated<string>;
  error: string | null;
  updated_at: Timestamp;
}

/** A user's webhook subscriptions (migration 0085). */
export interface WebhooksTable {
  id: string;
  user_id: string;
  url: string;
  events: string[];
  secret_sealed: string;
  created_at: Timestamp;
  deleted_at: NullableTimestamp;
}

/** The transactional outbox of webhook deliveries, and their state (migration 0085). */
export interface WebhookDeliveriesTable {
  id: Generated<string>;
  webhook_id: string;
  event_type: string;
  data: Json<Record<string, unknown>>;
  status: Generated<string>;
  attempts: Generated<number>;
  next_attempt_at: Timestamp;
  locked_until: NullableTimestamp;
  created_at: Timestamp;
  delivered_at: NullableTimestamp;
}

/** One try of a webhook delivery (migration 0085). */
interface WebhookDeliveryAttemptsTable {
  delivery_id: string;
  attempt: number;
  started_at: Timestamp;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
}

/** A user's own git account: one token per provider, sealed (migration 0040). */
export interface GitProvidersTable {
  id: string;
  user_id: string;
  provider: string;
  /** A self-hosted GitLab's or GitHub Enterprise's host; null: the deployment's host of that provider. */
  host: string | null;
  /** The token, sealed by the secret box (context `git-provider:<user_id>:<provider>`). */
  token_sealed: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** A pull request the agent opened from a conversation (migration 0040). */
interface PullRequestsTable {
  id: string;
  conversation_id: string;
  provider: string;
  repository: string;
  number: number;
  url: string;
  head: string;
  base: string;
  created_at: Timestamp;
}

/** A warm sandbox a worker's pool made (migration 0300): what the API claims in a start's transaction. */
export interface WarmSandboxesTable {
  id: string;
  name: string;
  ref: string;
  engine_id: string | null;
  image: string;
  /** The engine-agnostic spec a start asks for (its image). */
  spec: string;
  owner_worker: string;
  healthy: Generated<boolean>;
  /** The empty workspace the warm-up made, and the system prompt a start without a repository gets there. */
  workspace_dir: string;
  system_prompt: ColumnType<{ text: string; tools: unknown[] }, string, string>;
  /** The worker's LLM_MODEL: a conversation's model when neither the request nor the user names one. */
  llm_model: string | null;
  created_at: Timestamp;
  /** Renewed by the owner while it holds the container running; a claim takes only recent ones. */
  checked_at: Timestamp;
  claimed_at: NullableTimestamp;
  conversation_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A sandbox committed as an image after its setup script (migration 0320); per user and engine. */
interface RepoSnapshotsTable {
  id: string;
  user_id: string;
  engine_id: string;
  provider: string;
  repository: string;
  /** The branch asked for; "" for the repository's default branch. */
  branch: string;
  commit: string;
  /** sha256 of `.openhands/setup.sh` as it ran. */
  setup_hash: string;
  /** Whether the tree has `.openhands/pre-commit.sh`, and skills: a start from it runs those stages only then. */
  has_pre_commit: Generated<boolean>;
  has_skills: Generated<boolean>;
  /** The sandbox image the snapshot was made from. */
  base_image: string;
  /** The engine's id of the committed image. */
  image: string;
  /** What the snapshot adds to its base image. */
  bytes: ColumnType<number, number, number>;
  /** The sandbox it is committed from (migration 0350): while its image is "", that sandbox is not the agent's yet. */
  source_sandbox: string | null;
  /** What its start's hook and skill stages produced (migration 0500): a start from it runs neither. Null: run them. */
  stage_results: ColumnType<unknown | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  last_used_at: Timestamp;
}

export interface Database {
  users: UsersTable;
  api_keys: ApiKeysTable;
  start_tasks: StartTasksTable;
  conversations: ConversationsTable;
  sandboxes: SandboxesTable;
  events: EventsTable;
  agent_runs: AgentRunsTable;
  deployment_secrets: DeploymentSecretsTable;
  sandbox_specs: SandboxSpecsTable;
  sandbox_spec_images: SandboxSpecImagesTable;
  user_secrets: UserSecretsTable;
  user_settings: UserSettingsTable;
  conversation_confirmation_policies: ConversationConfirmationPoliciesTable;
  start_task_secrets: StartTaskSecretsTable;
  engines: EnginesTable;
  pending_messages: PendingMessagesTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_delivery_attempts: WebhookDeliveryAttemptsTable;
  git_providers: GitProvidersTable;
  pull_requests: PullRequestsTable;
  agent_server_conversations: AgentServerConversationsTable;
  agent_server_conversation_secrets: AgentServerConversationSecretsTable;
  warm_sandboxes: WarmSandboxesTable;
  repo_snapshots: RepoSnapshotsTable;
}

/** A conversation started on a sandbox's agent-server API: the agent its client named (migration 0210). */
export interface AgentServerConversationsTable {
  conversation_id: string;
  llm_model: string;
  llm_base_url: string | null;
  llm_api_key_sealed: string | null;
  tools: ColumnType<string[], string, string>;
  mcp_config_sealed: string | null;
  max_iterations: number;
  stuck_detection: boolean;
  working_dir: string;
  /** The client's agent as ConversationInfo echoes it: every secret the SDK's models mark masked. */
  agent: ColumnType<Record<string, unknown>, string, string>;
  /** The client's agent as given, sealed (migration 0510); null on rows from before. */
  agent_sealed: string | null;
  created_at: Generated<string>;
}

/** A conversation's own secrets given on the agent-server API, one sealed JSON object (migration 0210). */
interface AgentServerConversationSecretsTable {
  conversation_id: string;
  secrets_sealed: string;
  updated_at: Generated<string>;
}
