import { z } from "zod";

/**
 * THE CONTRACT OF THE WORKERS' INTERNAL HTTP API: the reads the API asks of the worker that drives
 * a sandbox's engine (apps/worker/src/http/server.ts serves them; @tern/services' worker-access.ts
 * calls them). Paths, query and body schemas live here, so the two sides cannot drift; a refusal
 * is the usual error body, its status from error-statuses.ts.
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

/** Every internal read: its route (as the server mounts it) and the query it takes. */
export const workerApi = {
  /** A file of the sandbox's workspace, as text. */
  file: {
    route: "/internal/sandboxes/:sandboxId/file",
    query: z.object({ path: z.string({ error: "required" }).min(1, "required") }),
  },
  /** The workspace's diff: `text` streams git's unified diff, `json` answers a WorkspaceDiff. */
  diff: {
    route: "/internal/sandboxes/:sandboxId/diff",
    query: z.object({ format: z.enum(diffFormats).default("text") }),
  },
  /** The workspace directory as a .tar.gz, streamed. */
  archive: {
    route: "/internal/sandboxes/:sandboxId/workspace.tar.gz",
    query: z.object({}),
  },
} as const;

export type WorkerRead = keyof typeof workerApi;
export type WorkerReadQuery<R extends WorkerRead> = z.input<(typeof workerApi)[R]["query"]>;

/** The path (with its query) of a read of one sandbox, as the client asks it. */
export const workerPath = <R extends WorkerRead>(read: R, sandboxId: string, query: WorkerReadQuery<R>): string => {
  const path = workerApi[read].route.replace(":sandboxId", encodeURIComponent(sandboxId));
  const search = new URLSearchParams(
    Object.entries(query as Record<string, string | undefined>).filter(
      (entry): entry is [string, string] => entry[1] !== undefined,
    ),
  ).toString();
  return search ? `${path}?${search}` : path;
};
