/**
 * The sandbox driver: the only way workers touch sandboxes. Docker implements it today
 * (docker/), Kubernetes is the planned next one behind the same interface.
 */

/** Labels every sandbox carries; the janitor and `docker ps --filter label=tern.sandbox` find them by these. */
export const SandboxLabel = {
  /** Present on every container of ours. */
  Marker: "tern.sandbox",
  /** The deployment (REDIS_PREFIX): a janitor only touches its own deployment's containers. */
  Namespace: "tern.namespace",
  SandboxId: "tern.sandbox_id",
  TaskId: "tern.task_id",
  ConversationId: "tern.conversation_id",
  /** "1" while the container waits in a warm pool, unclaimed. */
  Pool: "tern.pool",
} as const;

export interface SandboxLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
}

export interface SandboxSpec {
  /** Fixed, derived from the owner (e.g. the task id): a second create adopts the first container. */
  name: string;
  image: string;
  labels: Record<string, string>;
  env?: Record<string, string>;
  limits: SandboxLimits;
  /** Network of our own; no ports are ever published. */
  network: string;
}

export type SandboxState = "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead";

export interface SandboxInfo {
  /** Container id. */
  id: string;
  name: string;
  state: SandboxState;
  labels: Record<string, string>;
  createdAt: string;
}

export interface ExecOptions {
  cmd: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Defaults to the image's non-root user. */
  user?: string;
  /** The process (group) is killed when it runs longer; `timedOut` is then true. */
  timeoutMs?: number;
  stdin?: string | Buffer;
  /** Streamed output, as it arrives. */
  onOutput?: (chunk: string, stream: "stdout" | "stderr") => void;
  /** Kept output is capped at this many bytes per stream (default 1 MiB); `truncated` says so. */
  maxOutputBytes?: number;
}

export interface ExecResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
}

export interface FileToUpload {
  /** Path relative to the upload's destination directory. */
  path: string;
  content: string | Buffer;
  mode?: number;
}

export interface SandboxDriver {
  /** Creates and starts; when a container of that name exists (409), adopts it and makes sure it runs. */
  create(spec: SandboxSpec): Promise<SandboxInfo>;
  exec(containerId: string, opts: ExecOptions): Promise<ExecResult>;
  /** Writes files (as the sandbox user) under `destDir` through an archive upload. */
  upload(containerId: string, destDir: string, files: FileToUpload[]): Promise<void>;
  /** Reads one file; null when it does not exist. */
  download(containerId: string, path: string): Promise<Buffer | null>;
  pause(containerId: string): Promise<void>;
  resume(containerId: string): Promise<void>;
  /** Removes the container whatever its state; a missing container is not an error. */
  destroy(containerIdOrName: string): Promise<void>;
  inspect(containerIdOrName: string): Promise<SandboxInfo | null>;
  /** Every container carrying all of `labels`, in any state. */
  list(labels: Record<string, string>): Promise<SandboxInfo[]>;
}

/** A warm pool of started containers, claimed atomically by start jobs. */
export interface SandboxPool {
  /** A started container relabelled for its new owner, or null when none is warm. Never reused. */
  claim(owner: { taskId: string; sandboxId: string }): Promise<SandboxInfo | null>;
  start(): Promise<void>;
  /** Stops replenishing and removes the unclaimed containers. */
  stop(): Promise<void>;
}
