import type { ColumnType, Generated, JSONColumnType } from "kysely";

/** Timestamps come back as ISO 8601 UTC strings with microseconds (see connection.ts). */
type Timestamp = ColumnType<string, string | Date | undefined, string | Date>;
type NullableTimestamp = ColumnType<string | null, string | Date | null | undefined, string | Date | null>;
type Json<T extends object | null> = JSONColumnType<T, string, string>;

export interface UsersTable {
  id: string;
  is_admin: Generated<boolean>;
  created_at: Timestamp;
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
  session_api_key: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: string | null;
  llm_model: string | null;
  metrics: ColumnType<Record<string, number>, string | undefined, string>;
  skills: ColumnType<unknown[], string | undefined, string>;
  workspace_dir: string;
  last_seq: Generated<number>;
  last_event_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** The agent run holding the conversation's run lock (migration 0004). */
  active_run_id: Generated<string | null>;
  run_attempt: Generated<number>;
}

export interface SandboxesTable {
  id: string;
  start_task_id: string | null;
  conversation_id: string | null;
  container_name: string;
  container_id: string | null;
  status: string;
  image: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface EventsTable {
  id: string;
  conversation_id: string;
  seq: number;
  kind: string;
  source: string;
  timestamp: Timestamp;
  payload: Json<Record<string, unknown>>;
}

/** One row per agent run (migration 0004). */
export interface AgentRunsTable {
  id: string;
  conversation_id: string;
  status: string;
  attempts: Generated<number>;
  started_at: Timestamp;
  ended_at: NullableTimestamp;
}

export interface Database {
  users: UsersTable;
  api_keys: ApiKeysTable;
  start_tasks: StartTasksTable;
  conversations: ConversationsTable;
  sandboxes: SandboxesTable;
  events: EventsTable;
  agent_runs: AgentRunsTable;
}
