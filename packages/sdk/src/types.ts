/** The JSON records of the API (DESIGN, API contracts). Ids are 32 hex; datetimes ISO 8601 UTC. */

export type StartTaskStatus =
  | "WORKING"
  | "WAITING_FOR_SANDBOX"
  | "PREPARING_REPOSITORY"
  | "RUNNING_SETUP_SCRIPT"
  | "SETTING_UP_GIT_HOOKS"
  | "SETTING_UP_SKILLS"
  | "STARTING_CONVERSATION"
  | "READY"
  | "ERROR";

export type ExecutionStatus =
  | "idle"
  | "running"
  | "paused"
  | "waiting_for_confirmation"
  | "finished"
  | "error"
  | "stuck";
export type SandboxStatus = "STARTING" | "RUNNING" | "PAUSED" | "ERROR" | "MISSING";
export type EventKind =
  | "MessageEvent"
  | "ActionEvent"
  | "ObservationEvent"
  | "AgentErrorEvent"
  | "SystemPromptEvent"
  | "ConversationStateUpdateEvent"
  | "PauseEvent";
export type GitProvider = "github" | "gitlab" | "bitbucket";

export interface ApiKeyRecord {
  id: string;
  name: string | null;
  prefix: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
}

export interface CreatedApiKey extends Omit<ApiKeyRecord, "last_used_at"> {
  /** The key itself, shown this once. */
  key: string;
}

export interface StartRequest {
  title?: string | null;
  initial_message?: { role: "user"; content: { type: "text"; text: string }[]; run?: boolean } | null;
  llm_model?: string | null;
  selected_repository?: string | null;
  selected_branch?: string | null;
  git_provider?: GitProvider | null;
}

export interface StartTask {
  id: string;
  created_by_user_id: string;
  status: StartTaskStatus;
  detail: string | null;
  app_conversation_id: string | null;
  sandbox_id: string | null;
  agent_server_url: string | null;
  request: StartRequest;
  created_at: string;
  updated_at: string;
}

export interface AppConversation {
  id: string;
  created_by_user_id: string;
  title: string | null;
  sandbox_id: string | null;
  sandbox_status: SandboxStatus;
  execution_status: ExecutionStatus;
  conversation_url: string;
  session_api_key: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: GitProvider | null;
  llm_model: string | null;
  metrics: Record<string, number>;
  created_at: string;
  updated_at: string;
}

export interface Event {
  id: string;
  kind: EventKind;
  source: "agent" | "user" | "environment";
  timestamp: string;
  [field: string]: unknown;
}

export interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

export interface EventFilter {
  kind__eq?: EventKind;
  /** Inclusive; ISO 8601, no zone means UTC. */
  timestamp__gte?: string;
  /** Exclusive; ISO 8601, no zone means UTC. */
  timestamp__lt?: string;
}

export interface EventSearch extends EventFilter {
  sort_order?: "TIMESTAMP" | "TIMESTAMP_DESC";
  /** 1..100, default 100. */
  limit?: number;
  page_id?: string;
}
