import type { agentTypes, conversationTriggers, StartRequest } from "./schemas/start-request.ts";

export type ConversationTrigger = (typeof conversationTriggers)[number];
export type AgentType = (typeof agentTypes)[number];

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

/** The stages a start passes through, in order, up to READY (ERROR may end any of them). */
export const startStages: readonly StartTaskStatus[] = startTaskStatuses.filter((s) => s !== "ERROR");
/** The agent stopped and will not go on by itself. */
export const terminalExecutionStatuses = ["finished", "error", "stuck"] as const satisfies readonly ExecutionStatus[];
/** The terminal statuses that are a failure (a watcher exits non-zero on them). */
export const failedExecutionStatuses = ["error", "stuck"] as const satisfies readonly ExecutionStatus[];

export const sandboxStatuses = ["STARTING", "RUNNING", "PAUSED", "ERROR", "MISSING"] as const;
export type SandboxStatus = (typeof sandboxStatuses)[number];

export const gitProviders = ["github", "gitlab", "bitbucket"] as const;
export type GitProvider = (typeof gitProviders)[number];

export interface User {
  id: string;
  /** A label the operator gave (`cli users create --name`); null when none. */
  name: string | null;
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
  /** "sandbox": it makes a sandbox without a conversation (POST /api/v1/sandboxes), READY once that runs. */
  kind?: StartTaskKind;
}

export type StartTaskKind = "conversation" | "sandbox";

export interface Skill {
  name: string;
  /**
   * Keywords (and `/name` for a task skill) that add the skill to the user message that says one of
   * them, as a whole word. Empty, with no `paths` and not AgentSkills: always on (system prompt).
   */
  triggers: string[];
  content: string;
  /** The file it came from, relative to the workspace. */
  source: string;
  /** `agentskills`: a SKILL.md folder, listed by name and description and read in full on demand. */
  format?: "agentskills";
  /** What the skill is for: the listing shows it (AgentSkills front matter `description`). */
  description?: string;
  /** A path rule (a nested AGENTS.md, or front matter `paths`): added when the agent touches a matching file. */
  paths?: string[];
  /** Front matter `disable-model-invocation`: only its triggers bring it in; not listed, not invocable. */
  disableModelInvocation?: boolean;
}

/** OpenHands' skill types: `repo` always on, `knowledge` triggered, `agentskills` listed. */
export const skillType = (s: Skill): "repo" | "knowledge" | "agentskills" =>
  s.format === "agentskills"
    ? "agentskills"
    : s.triggers.length > 0 || (s.paths?.length ?? 0) > 0
      ? "knowledge"
      : "repo";

/**
 * A hook the repository brought, in OpenHands' shape (GetHooksResponse's items): an event, and per
 * matcher the commands that run on it. SETTING_UP_GIT_HOOKS records the pre-commit hook it installed.
 */
export interface RepositoryHook {
  event_type: string;
  matchers: {
    matcher: string;
    hooks: { type: "command"; command: string; timeout: number | null; async: boolean }[];
  }[];
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
  /** Its session key sealed in the secret box (openSessionApiKey); null once revoked. Never stored in plaintext. */
  sealedSessionApiKey: string | null;
  selectedRepository: string | null;
  selectedBranch: string | null;
  gitProvider: GitProvider | null;
  llmModel: string | null;
  /** OpenHands' start fields, stored and echoed. */
  trigger: ConversationTrigger | null;
  prNumber: number[];
  parentConversationId: string | null;
  /** Conversations started with this one as their parent. */
  subConversationIds: string[];
  public: boolean | null;
  agentType: AgentType;
  metrics: ConversationMetrics;
  skills: Skill[];
  /** What SETTING_UP_GIT_HOOKS installed. */
  hooks: RepositoryHook[];
  /** Absolute path of the workspace repository inside the sandbox. */
  workspaceDir: string;
  createdAt: string;
  updatedAt: string;
}

export interface Sandbox {
  id: string;
  /** Its owner: the user of the start task that made it, and so of its conversation. */
  userId: string | null;
  startTaskId: string | null;
  conversationId: string | null;
  /** Fixed per owner (e.g. `tern-task-<task id>`), unique: how a second attempt finds the sandbox. */
  name: string;
  /** The sandbox driver's reference to it, opaque outside the driver; null until created. */
  ref: string | null;
  status: SandboxStatus;
  image: string;
  createdAt: string;
  updatedAt: string;
  /** When the janitor paused it for idleness; null otherwise. Such a sandbox is resumed by the next run. */
  idlePausedAt: string | null;
  /**
   * The engine holding it, when its driver has affinity (only that engine's workers reach it); null
   * when every worker reaches it. Jobs on it go to that engine's queues.
   */
  engineId: string | null;
  /** When it was marked MISSING because its engine had no worker alive for ENGINE_LOST_AFTER. */
  engineLostAt: string | null;
}

/** A sandbox as its owner lists it: with its conversation's session key, when it has one. */
export interface OwnedSandbox extends Sandbox {
  /** Sealed as Conversation.sealedSessionApiKey is. */
  sealedSessionApiKey: string | null;
  /** The sandbox's own session key (a sandbox made by POST /api/v1/sandboxes), sealed under its id. */
  sealedSandboxSessionApiKey?: string | null;
}

/** An image this deployment offers for sandboxes (OpenHands' SandboxSpecInfo). */
export interface SandboxSpec {
  id: string;
  createdAt: string;
  /** The admin who named it (POST /api/v1/sandbox-specs); null: an image of the configuration. */
  addedBy?: string | null;
}

/** The runtime image an engine made of a spec's base image (its tools, user and workspace added). */
export interface SandboxSpecImage {
  specId: string;
  engineId: string;
  state: "building" | "ready" | "failed";
  image: string | null;
  /** Why it failed, naming the step. */
  error: string | null;
  /** The build's log (its end). */
  log: string;
  updatedAt: string;
}
