export const startTaskStatuses = [
  "WORKING",
  "WAITING_FOR_SANDBOX",
  "PREPARING_REPOSITORY",
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "SETTING_UP_SKILLS",
  "STARTING_CONVERSATION",
  "READY",
  "ERROR",
] as const;
export type StartTaskStatus = (typeof startTaskStatuses)[number];
export const terminalStartTaskStatuses: readonly StartTaskStatus[] = ["READY", "ERROR"];
export const isTerminalStartTaskStatus = (s: StartTaskStatus): boolean => terminalStartTaskStatuses.includes(s);

export const executionStatuses = [
  "idle",
  "running",
  "paused",
  "waiting_for_confirmation",
  "finished",
  "error",
  "stuck",
] as const;
export type ExecutionStatus = (typeof executionStatuses)[number];

export const sandboxStatuses = ["STARTING", "RUNNING", "PAUSED", "ERROR", "MISSING"] as const;
export type SandboxStatus = (typeof sandboxStatuses)[number];

export const eventKinds = [
  "MessageEvent",
  "ActionEvent",
  "ObservationEvent",
  "AgentErrorEvent",
  "SystemPromptEvent",
  "ConversationStateUpdateEvent",
  "PauseEvent",
] as const;
export type EventKind = (typeof eventKinds)[number];
export const isEventKind = (s: string): s is EventKind => (eventKinds as readonly string[]).includes(s);

export const eventSources = ["agent", "user", "environment"] as const;
export type EventSource = (typeof eventSources)[number];

export const gitProviders = ["github", "gitlab", "bitbucket"] as const;
export type GitProvider = (typeof gitProviders)[number];

export interface TextContent {
  type: "text";
  text: string;
}

export interface InitialMessage {
  role: "user";
  content: TextContent[];
  run?: boolean;
}

/** The start request as the client gave it; kept verbatim on the start task. */
export interface StartRequest {
  title?: string | null;
  initial_message?: InitialMessage | null;
  llm_model?: string | null;
  selected_repository?: string | null;
  selected_branch?: string | null;
  git_provider?: GitProvider | null;
}

export interface User {
  id: string;
  isAdmin: boolean;
  createdAt: string;
}

export interface ApiKey {
  id: string;
  userId: string;
  name: string | null;
  prefix: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface StartTask {
  id: string;
  userId: string;
  status: StartTaskStatus;
  detail: string | null;
  appConversationId: string | null;
  sandboxId: string | null;
  agentServerUrl: string | null;
  request: StartRequest;
  /** Fencing token: the BullMQ attempt that owns the task; stale writers are refused. */
  attempt: number;
  /** Milliseconds each finished stage took, by stage name. */
  stageDurations: Record<string, number>;
  createdAt: string;
  updatedAt: string;
}

export interface Skill {
  name: string;
  /** Empty: always on. Otherwise loaded when a user message contains one of them. */
  triggers: string[];
  content: string;
  source: string;
}

export interface ConversationMetrics {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  llm_calls: number;
  [key: string]: number;
}

export interface Conversation {
  id: string;
  userId: string;
  startTaskId: string | null;
  title: string | null;
  sandboxId: string | null;
  sandboxStatus: SandboxStatus;
  executionStatus: ExecutionStatus;
  sessionApiKey: string;
  selectedRepository: string | null;
  selectedBranch: string | null;
  gitProvider: GitProvider | null;
  llmModel: string | null;
  metrics: ConversationMetrics;
  skills: Skill[];
  /** Absolute path of the workspace repository inside the sandbox. */
  workspaceDir: string;
  createdAt: string;
  updatedAt: string;
}

export interface Sandbox {
  id: string;
  startTaskId: string | null;
  conversationId: string | null;
  containerName: string;
  containerId: string | null;
  status: SandboxStatus;
  image: string;
  createdAt: string;
  updatedAt: string;
}

export interface StoredEvent {
  id: string;
  conversationId: string;
  seq: number;
  kind: EventKind;
  source: EventSource;
  /** ISO 8601 UTC with microseconds, ending in Z. */
  timestamp: string;
  payload: Record<string, unknown>;
}

/** Event JSON as clients see it: `{ id, kind, source, timestamp, ...payload }`. */
export const eventToJson = (e: StoredEvent): Record<string, unknown> => ({
  ...e.payload,
  id: e.id,
  kind: e.kind,
  source: e.source,
  timestamp: e.timestamp,
});
