/**
 * The sandbox driver: the only way workers touch sandboxes. It speaks sandbox references and
 * states of our own, never its backend's words, so the worker runs unchanged on any driver.
 * Docker implements it today (docker/); Kubernetes is the planned next one.
 */

import type { Readable } from "node:stream";

/** Labels every sandbox carries; the janitor finds sandboxes by these, whatever the driver. */
export const SandboxLabel = {
  /** Present on every sandbox of ours. */
  Marker: "tern.sandbox",
  /** The deployment (REDIS_PREFIX): a janitor only touches its own deployment's sandboxes. */
  Namespace: "tern.namespace",
  SandboxId: "tern.sandbox_id",
  TaskId: "tern.task_id",
  ConversationId: "tern.conversation_id",
  /** "1" while the sandbox waits in a warm pool, unclaimed. */
  Pool: "tern.pool",
  /**
   * The engine the sandbox lives on (PreparedSandboxes.engineId), on drivers whose sandboxes only
   * that engine's workers reach; absent otherwise.
   */
  Engine: "tern.engine",
} as const;

/** Labels of the images the worker makes of sandboxes and for them; the janitor finds them by these. */
export const ImageLabel = {
  /** A repository snapshot (REPO_SNAPSHOTS): its row, and the user it belongs to. */
  Snapshot: "tern.snapshot",
  SnapshotId: "tern.snapshot_id",
  SnapshotUserId: "tern.user_id",
  /** An empty-workspace image, and the sandbox image (name and id) it was made from. */
  WorkspaceImage: "tern.workspace_image",
  WorkspaceBase: "tern.workspace_base",
  WorkspaceBaseId: "tern.workspace_base_id",
} as const;

/**
 * A small memory-backed directory in every sandbox, outside its disk limit and gone when it
 * restarts: the tools' own state (the terminal's programs, output and exit status), so a full
 * workspace disk never keeps the agent from reading a result.
 */
export const SANDBOX_STATE_DIR = "/tmp/tern-term";
/** Its size, in MiB (counted in the sandbox's memory). */
export const SANDBOX_STATE_MB = 64;

/**
 * How callers address a sandbox: what `create` gave back as `SandboxInfo.ref`, opaque to them
 * (Docker: the container id). A sandbox's `name` is accepted wherever a ref is, since names are
 * unique and chosen by the caller: a caller that lost the ref (a crash before it was recorded)
 * still reaches the sandbox by the name it gave it.
 */
export type SandboxRef = string;

/**
 * Our own states; each driver maps its backend's onto them.
 * - `starting`: exists but has not run yet.
 * - `running`: commands can run in it.
 * - `paused`: frozen; `resume` brings it back as it was.
 * - `stopped`: its processes ended; a second `create` of the same name starts it again.
 * - `failed`: broken or on its way out; it will not run again.
 */
export type SandboxState = "starting" | "running" | "paused" | "stopped" | "failed";

export interface SandboxLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
  /**
   * Open files per process (RLIMIT_NOFILE, soft = hard); unset: DEFAULT_NOFILE.
   */
  nofile?: number;
  /**
   * Processes of the sandbox user (RLIMIT_NPROC, soft = hard); unset: DEFAULT_NPROC. The kernel counts
   * every process of that uid on the host, in every sandbox, so this is a backstop above
   * `pids` × sandboxes, never the per-sandbox limit: `pids` (a cgroup) is.
   */
  nproc?: number;
  /** Writes to the sandbox's own filesystem, in MiB; unset: the driver's containment decides. */
  diskMb?: number;
}

export interface SandboxSpec {
  /** Fixed, derived from the owner (e.g. the task id): a second create adopts the first sandbox. */
  name: string;
  image: string;
  labels: Record<string, string>;
  env?: Record<string, string>;
  limits: SandboxLimits;
  /** The runtime it runs under (e.g. runsc for gVisor); unset: the driver's containment decides. */
  runtime?: string;
}

/**
 * What a driver holds every sandbox to, beyond its spec's limits. `prepare` checks each part and
 * installs what needs installing, and throws a ContainmentError when the backend cannot; a part
 * left out is not asked for (an operator's explicit choice).
 */
export interface SandboxContainment {
  /** Each sandbox's writes, in MiB (a spec's own `limits.diskMb` wins). */
  diskMb?: number;
  /** The runtime sandboxes run under (a spec's own `runtime` wins). */
  runtime?: string;
  egress?: SandboxEgress;
  /**
   * Root for the sandbox's user (`sudo`): `auto`, only where the backend's root is no host root
   * (see RootState); `force`, everywhere (the operator's explicit choice); `off`, nowhere. Unset: off.
   */
  sudo?: SudoSetting;
}

export type SudoSetting = "auto" | "force" | "off";

/**
 * What makes root inside a sandbox safe: the engine maps a container's root to an unprivileged host
 * uid (`userns-remap`, `rootless`), or the sandbox runs under gVisor (`runsc`), whose kernel is not
 * the host's.
 */
export type RootSafety = "userns-remap" | "rootless" | "runsc";

/**
 * Whether sandboxes' user has sudo (`sudo`: root inside, with the capabilities package installs
 * need) or not (`none`: no capability, no privilege gain), and why.
 */
export interface RootState {
  mode: "sudo" | "none";
  /** What makes root safe on this backend for its default runtime; null: nothing does. */
  safety: RootSafety | null;
  /** sudo where nothing makes root safe: SANDBOX_SUDO=force. */
  forced: boolean;
}

/**
 * What sandboxes may reach. Never the host itself, other sandboxes, link-local addresses or
 * private ranges, except `services` and `allow`; the public internet in mode `public` only.
 */
export interface SandboxEgress {
  mode: "none" | "public" | "allowlist";
  /** Reachable in every mode, exactly this host (name or address, resolved by `prepare`) and TCP port: the git hosts. */
  services: { host: string; port: number }[];
  /** Host names, addresses or CIDRs reachable in every mode, private ones included (never the host itself). */
  allow: string[];
  /**
   * How often the names are resolved again, in ms (addresses move); a name that did not resolve is
   * retried sooner. Unset: once a minute.
   */
  refreshMs?: number;
}

/**
 * Which disk limit holds the sandboxes: `hard`, the backend's own (a write past it fails);
 * `watched`, the driver's user samples what each sandbox wrote and stops it past the limit (a
 * backend that cannot hold one); `off`, none (the operator's explicit choice).
 */
export type DiskLimitMode = "hard" | "watched" | "off";

/** A name of the egress policy that did not resolve: the rest of the policy holds without it. */
export interface UnresolvedEgressName {
  name: string;
  reason: string;
  /** When it first failed (ISO 8601). */
  since: string;
}

/** What holds the sandboxes in now, in our words: for /ready, /metrics and the start-up log. */
export interface ContainmentState {
  disk: { mode: DiskLimitMode; limitMb: number | null; storage: string | null };
  /** Null: no egress rules are installed (SANDBOX_EGRESS_ENFORCE=false). */
  egress: {
    mode: SandboxEgress["mode"];
    unresolved: UnresolvedEgressName[];
    /** When the names were last resolved (ISO 8601). */
    refreshedAt: string;
  } | null;
  /** Root in sandboxes of the default runtime (a spec with a runtime of its own may differ). */
  root: RootState;
}

/** Where the operator reads what each root mode isolates. */
export const ROOT_MODES_DOC = 'the README, "Root in sandboxes"';

/**
 * Why a command's `sudo` failed, in words for the start's error, when its output shows sudo refused
 * by the kernel's no-new-privileges (a sandbox without root); null when it shows no such refusal.
 */
export const sudoRefusalOf = (output: string, root: RootState | undefined): string | null => {
  if (!/sudo: .*"?no new privileges"? flag/i.test(output)) return null;
  if (root?.safety && root.mode === "none") {
    return `sudo is turned off for this worker's sandboxes (SANDBOX_SUDO=off); see ${ROOT_MODES_DOC}`;
  }
  return (
    "sudo: this engine does not map root to an unprivileged user; see " +
    `${ROOT_MODES_DOC} (userns-remap, rootless Docker, SANDBOX_RUNTIME=runsc)`
  );
};

/** A part of the containment the backend cannot provide; `prepare` refuses to go on. */
export class ContainmentError extends Error {
  readonly part: "disk" | "runtime" | "egress";
  constructor(part: "disk" | "runtime" | "egress", message: string) {
    super(message);
    this.name = "ContainmentError";
    this.part = part;
  }
}

export interface SandboxInfo {
  ref: SandboxRef;
  name: string;
  state: SandboxState;
  labels: Record<string, string>;
  createdAt: string;
  /** The image it was created from, as its spec named it (absent when the backend does not say). */
  image?: string;
}

/** What `prepare` set up. */
export interface PreparedSandboxes {
  /**
   * This host's address as its sandboxes reach it (Docker: the sandbox network's gateway), or
   * null when they cannot; a service sandboxes must reach (a test's git server) listens there.
   */
  hostAddress: string | null;
  /** Facts for the start-up log (Docker: the network). */
  summary: Record<string, string>;
  /**
   * Affinity. The engine this driver's sandboxes live on when only the workers driving that engine
   * can reach them (Docker: ENGINE_ID, else the engine's own id from `docker info`): every later
   * job on a sandbox must then run on a worker of its engine. Null when every worker reaches every
   * sandbox (a cluster-wide backend, such as the planned Kubernetes driver): no job needs affinity.
   */
  engineId: string | null;
}

export interface ExecOptions {
  cmd: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Defaults to the image's non-root user. */
  user?: string;
  /** The process (group) is killed when it runs longer; `timedOut` is then true. */
  timeoutMs?: number;
  /**
   * What the process reads. A stream is sent as it comes and closed at its end; if it fails, the
   * call rejects with its error (the process is left to see its input cut short).
   */
  stdin?: string | Buffer | Readable;
  /** Streamed output, as it arrives. */
  onOutput?: (chunk: string, stream: "stdout" | "stderr") => void;
  /** Kept output is capped at this many bytes per stream (default 1 MiB); `truncated` says so. */
  maxOutputBytes?: number;
  /**
   * Stops waiting: the call rejects with the signal's reason. The process itself runs on in the
   * sandbox (no backend can kill an exec from outside); what it leaves behind is for a later call.
   */
  signal?: AbortSignal;
}

export interface ExecResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
}

/** What `openProcess` starts: a process in the sandbox with its stdin and stdout held open. */
export interface SandboxProcessOptions {
  cmd: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Defaults to the image's non-root user. */
  user?: string;
}

/**
 * A long-lived process in a sandbox, spoken to over its stdin and stdout (a stdio MCP server).
 * `closed` settles when its output ends: it exited, or the connection to it dropped.
 */
export interface SandboxProcess {
  write(data: string | Buffer): void;
  /** Closes its stdin (most servers exit on that). */
  end(): void;
  onStdout(listener: (chunk: Buffer) => void): void;
  onStderr(listener: (chunk: Buffer) => void): void;
  /** Stops reading its output until `resume` (a slow reader's backpressure reaches the process). */
  pause(): void;
  resume(): void;
  closed: Promise<void>;
  /** Drops the connection; the process may run on (kill it from inside the sandbox). */
  detach(): void;
}

export interface FileToUpload {
  /** Path relative to the upload's destination directory. */
  path: string;
  content: string | Buffer;
  mode?: number;
}

/** An image `commit` made (a repository snapshot), as `listImages` finds it. */
export interface SandboxImage {
  /** The backend's id of the image: what `create` takes as a spec's `image`, and `removeImage` removes. */
  image: string;
  labels: Record<string, string>;
  createdAt: string;
}

export interface CommitOptions {
  /** The image the sandbox was created from: the snapshot keeps its environment and nothing else. */
  baseImage: string;
  /** The image's own labels. The sandbox's labels are not kept (each is blanked). */
  labels: Record<string, string>;
}

/** Labels of a runtime image (a spec's base image with tern's tools, prepareRuntimeImage). */
export const RuntimeImageLabel = {
  /** Present on every runtime image; its value is the spec (the base image as named). */
  Spec: "tern.runtime.spec",
  /** The base image's id it was made from. */
  Base: "tern.runtime.base",
  /** The tools version it carries. */
  Tools: "tern.runtime.tools",
} as const;

export interface RuntimeImageOptions {
  /** The image tern's tools are copied from (SANDBOX_IMAGE). */
  toolsFrom: string;
  /** The images' own labels (the spec, the deployment). */
  labels: Record<string, string>;
  /** Each step, as it happens (kept as the build's log); a build begins with a line "building …". */
  log?: (line: string) => void;
}

export interface RuntimeImageResult {
  /** What `create` takes as a spec's image. */
  image: string;
  /** False when it was there already. */
  built: boolean;
  baseId: string;
  toolsVersion: string;
}

/** A runtime image's build failed at `step`. */
export class RuntimeImageError extends Error {
  readonly step: string;
  constructor(step: string, message: string) {
    super(`preparing the image failed at "${step}": ${message}`);
    this.name = "RuntimeImageError";
    this.step = step;
  }
}

export interface SandboxDriver {
  /**
   * Reaches the backend and sets up what every sandbox shares (Docker: the engine answers, and the
   * sandboxes' own network exists). Once at start, before the first `create`; safe to repeat.
   */
  prepare(): Promise<PreparedSandboxes>;
  /** Creates and starts; when a sandbox of that name exists, adopts it and makes sure it runs. */
  create(spec: SandboxSpec): Promise<SandboxInfo>;
  exec(sandbox: SandboxRef, opts: ExecOptions): Promise<ExecResult>;
  /** Starts a process kept open for its stdin and stdout (drivers that cannot leave it out). */
  openProcess?(sandbox: SandboxRef, opts: SandboxProcessOptions): Promise<SandboxProcess>;
  /** Writes files (as the sandbox user) under `destDir`. */
  upload(sandbox: SandboxRef, destDir: string, files: FileToUpload[]): Promise<void>;
  /**
   * Unpacks a tar stream under `destDir` (which must exist) as it comes, never held whole. Entries keep
   * the owner their headers name: the caller builds the archive owned by the sandbox user (1000:1000).
   * How a tree made outside the sandbox (the worker's clone) gets in without the sandbox fetching it.
   */
  putArchive(sandbox: SandboxRef, destDir: string, archive: NodeJS.ReadableStream): Promise<void>;
  /** Reads one file; null when it does not exist. */
  download(sandbox: SandboxRef, path: string): Promise<Buffer | null>;
  /**
   * A directory (or file) as an uncompressed tar, streamed as the backend reads it (never held
   * whole: the reader's pace sets the backend's); null when the path does not exist. Symlinks are
   * archived as links, never followed.
   */
  archive(sandbox: SandboxRef, path: string): Promise<NodeJS.ReadableStream | null>;
  pause(sandbox: SandboxRef): Promise<void>;
  resume(sandbox: SandboxRef): Promise<void>;
  /** Removes the sandbox whatever its state; a missing sandbox is not an error. */
  destroy(sandbox: SandboxRef): Promise<void>;
  /** Null when there is no such sandbox. */
  inspect(sandbox: SandboxRef): Promise<SandboxInfo | null>;
  /** Every sandbox carrying all of `labels`, in any state. */
  list(labels: Record<string, string>): Promise<SandboxInfo[]>;
  /** After `prepare`: what holds the sandboxes in now (drivers without containment leave it out). */
  containmentState?(): ContainmentState;
  /**
   * Bytes the sandbox has written to its own filesystem, its workspace included (what a disk limit
   * counts); null when there is no such sandbox. For a `watched` disk limit.
   */
  writtenBytes?(sandbox: SandboxRef): Promise<number | null>;
  /** Stops what `prepare` left running (the egress names' refresh). */
  close?(): Promise<void>;
  /**
   * Saves the sandbox's filesystem as an image, without pausing it (the caller runs nothing in it
   * meanwhile). The image's environment is the base image's, and a sandbox given environment of its
   * own at create is refused (a backend may keep the sandbox's config beside the image's): values
   * commands got per exec (secrets) never enter an image. Returns the image and the bytes it adds
   * to its base. Drivers that cannot leave it out (no snapshots).
   */
  commit?(sandbox: SandboxRef, opts: CommitOptions): Promise<{ image: string; bytes: number }>;
  /** Every image `commit` made carrying all of `labels`. */
  listImages?(labels: Record<string, string>): Promise<SandboxImage[]>;
  /** Removes an image; a missing one, or one a sandbox still runs from, is left (no error). */
  removeImage?(image: string): Promise<void>;
  /**
   * The backend's id of an image named by `image` (a tag, or an id): it changes when the tag is
   * built again. Null when there is no such image.
   */
  imageId?(image: string): Promise<string | null>;
  /**
   * The image a sandbox of spec `base` (any image) is created from: `base` with tern's tools, the
   * sandbox user and the workspace added, built once per base image and tools version and found
   * after that. Drivers that cannot leave it out (the default image only).
   */
  prepareRuntimeImage?(base: string, opts: RuntimeImageOptions): Promise<RuntimeImageResult>;
}

/** A warm pool of started sandboxes, claimed atomically by start jobs. */
export interface SandboxPool {
  /** A started sandbox handed to its new owner, or null when none is warm. Never reused. */
  claim(owner: { taskId: string; sandboxId: string }): Promise<SandboxInfo | null>;
  start(): Promise<void>;
  /** Stops replenishing and removes the unclaimed sandboxes. */
  stop(): Promise<void>;
}
