import { Readable } from "node:stream";
import { createGzip } from "node:zlib";
import { type FileDiff, GoneError, PayloadTooLargeError, type WorkspaceDiff } from "@tern/core";
import type { SandboxDriver } from "@tern/sandbox";
import { EMPTY_TREE, GIT_EXIT, gitScript } from "../git-scripts.ts";
import { type ReadFileDeps, readableSandbox, whyExecFailed } from "./read-file.ts";

export interface WorkspaceResultDeps extends ReadFileDeps {
  sandboxes: Pick<SandboxDriver, "exec" | "inspect" | "archive">;
}

/** A JSON diff is parsed here, so it is bounded; the text diff is streamed whatever its size. */
const MAX_JSON_DIFF_BYTES = 16 * 1024 * 1024;

/** Splits a unified diff (git's) into one entry per file. */
const parseGitDiff = (text: string): FileDiff[] => {
  const files: FileDiff[] = [];
  for (const chunk of text.split(/^(?=diff --git )/m)) {
    if (!chunk.startsWith("diff --git ")) continue;
    const lines = chunk.split("\n");
    const header = /^diff --git a\/(.*) b\/(.*)$/.exec(lines[0] ?? "");
    let oldPath = header?.[1] ?? null;
    let path = header?.[2] ?? "";
    let status: FileDiff["status"] = "modified";
    let binary = false;
    let additions = 0;
    let deletions = 0;
    let inHunk = false;
    for (const line of lines.slice(1)) {
      if (inHunk) {
        if (line.startsWith("+")) additions++;
        else if (line.startsWith("-")) deletions++;
        continue;
      }
      if (line.startsWith("new file mode")) status = "added";
      else if (line.startsWith("deleted file mode")) status = "deleted";
      else if (line.startsWith("rename from ")) {
        status = "renamed";
        oldPath = line.slice("rename from ".length);
      } else if (line.startsWith("rename to ")) path = line.slice("rename to ".length);
      else if (line.startsWith("Binary files ")) binary = true;
      else if (line.startsWith("@@")) inHunk = true;
    }
    files.push({
      path,
      old_path: status === "renamed" ? oldPath : null,
      status,
      binary,
      additions,
      deletions,
      patch: chunk.replace(/\n$/, ""),
    });
  }
  return files;
};

/** The diff as text, streamed as git writes it. */
export const streamWorkspaceDiff = async (
  deps: WorkspaceResultDeps,
  sandboxId: string,
): Promise<ReadableStream<Uint8Array>> => {
  const { sandbox, dir } = await readableSandbox(deps, sandboxId);
  const ref = sandbox.ref ?? sandbox.name;
  const encoder = new TextEncoder();
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
  });
  deps.sandboxes
    .exec(ref, {
      cmd: gitScript("workspace-diff", dir),
      maxOutputBytes: 64 * 1024,
      onOutput: (chunk, stream) => {
        if (stream === "stdout") controller?.enqueue(encoder.encode(chunk));
      },
    })
    .then((r) => {
      if (r.exitCode === 0 || r.exitCode === GIT_EXIT.notARepository) controller?.close();
      else controller?.error(new Error(`git diff failed (exit ${r.exitCode}): ${r.stderr.trim()}`));
    })
    .catch((err) => controller?.error(err));
  return body;
};

/** The diff as one entry per file. */
export const workspaceDiffFiles = async (deps: WorkspaceResultDeps, sandboxId: string): Promise<WorkspaceDiff> => {
  const { sandbox, dir } = await readableSandbox(deps, sandboxId);
  const ref = sandbox.ref ?? sandbox.name;
  const r = await deps.sandboxes
    .exec(ref, { cmd: gitScript("workspace-diff", dir), maxOutputBytes: MAX_JSON_DIFF_BYTES })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  if (r.exitCode === GIT_EXIT.notARepository) return { base_commit: null, files: [] };
  if (r.exitCode !== 0) throw new Error(`git diff failed (exit ${r.exitCode}): ${r.stderr.trim()}`);
  if (r.truncated) {
    throw new PayloadTooLargeError(`The diff is larger than ${MAX_JSON_DIFF_BYTES} bytes; ask for format=text`);
  }
  const base = r.stderr.trim().split("\n").at(-1) ?? "";
  return { base_commit: base === EMPTY_TREE ? null : base, files: parseGitDiff(r.stdout) };
};

/** The workspace directory as a .tar.gz, compressed as the engine streams it (backpressure end to end). */
export const streamWorkspaceArchive = async (
  deps: WorkspaceResultDeps,
  sandboxId: string,
): Promise<ReadableStream<Uint8Array>> => {
  const { sandbox, dir } = await readableSandbox(deps, sandboxId);
  const ref = sandbox.ref ?? sandbox.name;
  const tar = await deps.sandboxes.archive(ref, dir).catch((err) => whyExecFailed(deps, sandbox, err));
  if (!tar) throw new GoneError("The workspace directory is gone from the sandbox");
  const gz = (tar as NodeJS.ReadableStream & { pipe: Readable["pipe"] }).pipe(createGzip());
  tar.on("error", (err: Error) => gz.destroy(err));
  return Readable.toWeb(gz) as ReadableStream<Uint8Array>;
};
