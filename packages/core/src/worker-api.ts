import { z } from "zod";

/**
 * THE CONTRACT OF THE WORKERS' INTERNAL HTTP API: what the API asks of the worker that drives a
 * sandbox's engine, since the API never talks to the engine itself. The reads that need a sandbox
 * (a file, the diff, the workspace archive) and the agent-server operations (run a bash command,
 * write and read a file, git's view of the workspace) are one table: each operation's method,
 * route, query schema and, where the API reads its answer, the answer's schema.
 * apps/worker/src/http/contract.ts serves the table; @tern/services' worker-access.ts (`callWorker`)
 * is its one client. A refusal is the usual error body, its status from error-statuses.ts.
 */

export const fileDiffSchema = z
  .object({
    path: z.string(),
    old_path: z.string().nullable(),
    status: z.enum(["added", "deleted", "modified", "renamed"]),
    binary: z.boolean(),
    additions: z.number().int(),
    deletions: z.number().int(),
    patch: z.string().meta({ description: "This file's part of the unified diff" }),
  })
  .meta({ id: "FileDiff" });

export type FileDiff = z.infer<typeof fileDiffSchema>;

export const workspaceDiffSchema = z
  .object({
    base_commit: z.string().nullable().meta({ description: "null: compared with the empty tree" }),
    files: z.array(fileDiffSchema),
  })
  .meta({ id: "WorkspaceDiff" });

export type WorkspaceDiff = z.infer<typeof workspaceDiffSchema>;

export const diffFormats = ["text", "json"] as const;
export type DiffFormat = (typeof diffFormats)[number];

/** The last output of a bash command, as the worker stored it (what execute_bash_command answers). */
export const bashLastOutputSchema = z.object({
  id: z.string(),
  timestamp: z.string(),
  order: z.number().int(),
  exitCode: z.number().int().nullable(),
  stdout: z.string().nullable(),
  stderr: z.string().nullable(),
});

export type BashLastOutput = z.infer<typeof bashLastOutputSchema>;

/** One changed path of a repository, as the agent server's GitChange has it. */
export const gitChangeSchema = z.object({
  status: z.enum(["MOVED", "ADDED", "DELETED", "UPDATED"]),
  path: z.string(),
});

export type GitChange = z.infer<typeof gitChangeSchema>;

/** One file's content now and at the ref (the agent server's GitDiff); null where it does not exist. */
export const gitFileDiffSchema = z.object({ modified: z.string().nullable(), original: z.string().nullable() });

export type GitFileDiff = z.infer<typeof gitFileDiffSchema>;

/**
 * The longest path or git ref a caller may name: Linux's PATH_MAX, in characters. Longer names no
 * file, and would not fit the worker's request line.
 */
export const MAX_SANDBOX_PATH = 4096;

/** A path of the sandbox, which the worker resolves there (absolute for the agent-server operations). */
export const sandboxPathSchema = z
  .string({ error: "required" })
  .min(1, "required")
  .max(MAX_SANDBOX_PATH, `longer than ${MAX_SANDBOX_PATH} characters`);
/** A git ref a caller names, at most as long as a path. */
export const gitRefSchema = z.string().max(MAX_SANDBOX_PATH, `longer than ${MAX_SANDBOX_PATH} characters`);

/** Every operation of the workers' internal API. */
export const workerApi = {
  /** A file of the sandbox's workspace, as text. */
  file: {
    method: "GET",
    route: "/internal/sandboxes/:sandboxId/file",
    query: z.object({ path: sandboxPathSchema }),
  },
  /** The workspace's diff: `text` streams git's unified diff, `json` answers a WorkspaceDiff. */
  diff: {
    method: "GET",
    route: "/internal/sandboxes/:sandboxId/diff",
    query: z.object({ format: z.enum(diffFormats).default("text") }),
  },
  /** The workspace directory as a .tar.gz, streamed. */
  archive: {
    method: "GET",
    route: "/internal/sandboxes/:sandboxId/workspace.tar.gz",
    query: z.object({}),
  },
  /**
   * Runs a stored bash command (the API stored it). `wait=1`: answers once its last output is
   * stored, with that output (null when someone else ended it), or after `max_wait_ms` with its
   * output so far (`finished: false`, not stored: the command goes on); otherwise at once.
   */
  bash: {
    method: "POST",
    route: "/internal/sandboxes/:sandboxId/bash/:commandId",
    query: z.object({
      wait: z.enum(["1"]).optional(),
      max_wait_ms: z.coerce.number().int().positive().optional(),
    }),
    result: z.object({ finished: z.boolean(), last: bashLastOutputSchema.nullable().optional() }),
  },
  /** The request's body, raw, written to the file at `path` (streamed); past `max` bytes 413. */
  upload: {
    method: "POST",
    route: "/internal/sandboxes/:sandboxId/agent-files",
    query: z.object({ path: sandboxPathSchema, max: z.coerce.number().int().positive().optional() }),
  },
  /** The file at `path`, streamed. */
  download: {
    method: "GET",
    route: "/internal/sandboxes/:sandboxId/agent-files",
    query: z.object({ path: sandboxPathSchema }),
  },
  /** The changes of the repository at `path` against `ref` (OpenHands' default ref when absent). */
  gitChanges: {
    method: "GET",
    route: "/internal/sandboxes/:sandboxId/git/changes",
    query: z.object({ path: sandboxPathSchema, ref: gitRefSchema.optional() }),
    result: z.array(gitChangeSchema),
  },
  /** One file's content now and at `ref`. */
  gitDiff: {
    method: "GET",
    route: "/internal/sandboxes/:sandboxId/git/diff",
    query: z.object({ path: sandboxPathSchema, ref: gitRefSchema.optional() }),
    result: gitFileDiffSchema,
  },
} as const satisfies Record<
  string,
  { method: "GET" | "POST"; route: `/internal/${string}`; query: z.ZodType; result?: z.ZodType }
>;

export type WorkerOp = keyof typeof workerApi;
export type WorkerQuery<O extends WorkerOp> = z.input<(typeof workerApi)[O]["query"]>;
/** The operations whose answer the API reads as JSON, and that answer. */
export type WorkerResultOp = {
  [O in WorkerOp]: (typeof workerApi)[O] extends { result: z.ZodType } ? O : never;
}[WorkerOp];
export type WorkerResult<O extends WorkerResultOp> = z.output<(typeof workerApi)[O]["result"]>;

/** The `:name` parameters of a route, as an object of strings. */
type RouteParams<R extends string> = R extends `${string}:${infer P}/${infer Rest}`
  ? { [K in P]: string } & RouteParams<`/${Rest}`>
  : R extends `${string}:${infer P}`
    ? { [K in P]: string }
    : Record<never, string>;

export type WorkerParams<O extends WorkerOp> = RouteParams<(typeof workerApi)[O]["route"]>;

/** The path (with its query) of an operation, as the client asks it. */
export const workerPath = <O extends WorkerOp>(op: O, params: WorkerParams<O>, query: WorkerQuery<O>): string => {
  const path = workerApi[op].route.replace(/:([A-Za-z]+)/g, (_, name: string) =>
    encodeURIComponent((params as Record<string, string>)[name] ?? ""),
  );
  const search = new URLSearchParams(
    Object.entries(query as Record<string, string | number | undefined>)
      .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
      .map(([k, v]) => [k, String(v)]),
  ).toString();
  return search ? `${path}?${search}` : path;
};
