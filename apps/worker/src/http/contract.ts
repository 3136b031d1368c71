import {
  type Logger,
  ValidationError,
  type WorkerOp,
  type WorkerResult,
  type WorkerResultOp,
  workerApi,
} from "@tern/core";
import type { Context, Hono } from "hono";
import type { z } from "zod";
import {
  type AgentOpsDeps,
  downloadWorkspaceFile,
  startBashCommand,
  uploadWorkspaceFile,
  workspaceGitChanges,
  workspaceGitDiff,
} from "./agent-ops.ts";
import { readSandboxFile } from "./read-file.ts";
import { streamWorkspaceArchive, streamWorkspaceDiff, workspaceDiffFiles } from "./workspace-results.ts";

/**
 * The worker's side of the workers' internal API (@tern/core's worker-api.ts): every operation of
 * the contract's table served at its method and route, its query parsed by the contract's schema
 * (a bad one is the caller's ValidationError, 422). An operation whose answer the contract types
 * returns that answer (sent as JSON); the others return their response, body streamed.
 */

/** An upload is refused past this whatever the API asked (`max`): the worker's own bound. */
const HARD_MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;

interface Request<O extends WorkerOp> {
  c: Context;
  sandboxId: string;
  params: Record<string, string>;
  query: z.output<(typeof workerApi)[O]["query"]>;
}

type Handler<O extends WorkerOp> = (req: Request<O>) => Promise<O extends WorkerResultOp ? WorkerResult<O> : Response>;

export type ContractDeps = AgentOpsDeps & { logger: Logger };

const handlers = (deps: ContractDeps): { [O in WorkerOp]: Handler<O> } => ({
  file: async ({ c, sandboxId, query }) => c.text(await readSandboxFile(deps, sandboxId, query.path), 200),
  diff: async ({ c, sandboxId, query }) => {
    if (query.format === "json") return c.json(await workspaceDiffFiles(deps, sandboxId), 200);
    const body = await streamWorkspaceDiff(deps, sandboxId);
    return c.body(body, 200, { "content-type": "text/x-diff; charset=utf-8" });
  },
  archive: async ({ c, sandboxId }) =>
    c.body(await streamWorkspaceArchive(deps, sandboxId), 200, { "content-type": "application/gzip" }),
  bash: async ({ sandboxId, params, query }) => {
    const { done, soFar } = await startBashCommand(deps, sandboxId, params.commandId ?? "");
    done.catch((err) => deps.logger.error({ err }, "a bash command failed to run"));
    if (query.wait !== "1") return { finished: false };
    // Waited: the last output, stored before this answer, so the API answers it without reading
    // it back; past max_wait_ms, what ran so far (the command goes on).
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      if (query.max_wait_ms !== undefined) timer = setTimeout(() => resolve("late"), query.max_wait_ms);
    });
    const last = await Promise.race([done, late]).finally(() => clearTimeout(timer));
    return last === "late" ? { finished: false, last: soFar() } : { finished: true, last };
  },
  upload: async ({ c, sandboxId, query }) => {
    const max = Math.min(query.max ?? HARD_MAX_UPLOAD_BYTES, HARD_MAX_UPLOAD_BYTES);
    await uploadWorkspaceFile(deps, sandboxId, query.path, c.req.raw.body, max);
    return c.json({ success: true }, 200);
  },
  download: async ({ c, sandboxId, query }) => {
    const { name, body } = await downloadWorkspaceFile(deps, sandboxId, query.path);
    return c.body(body, 200, {
      "content-type": "application/octet-stream",
      "content-disposition": `attachment; filename*=utf-8''${encodeURIComponent(name)}`,
    });
  },
  gitChanges: ({ sandboxId, query }) => workspaceGitChanges(deps, sandboxId, query.path, query.ref),
  gitDiff: ({ sandboxId, query }) => workspaceGitDiff(deps, sandboxId, query.path, query.ref),
});

const queryOf = (op: WorkerOp, query: Record<string, string>) => {
  const parsed = workerApi[op].query.safeParse(query);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ValidationError(problems.join("; "));
  }
  return parsed.data;
};

/** Serves every operation of the contract on `app` (behind the internal token, which the server checks). */
export const serveWorkerApi = (app: Hono, deps: ContractDeps) => {
  const served = handlers(deps);
  for (const op of Object.keys(workerApi) as WorkerOp[]) {
    const { method, route } = workerApi[op];
    const handler = served[op] as (req: Request<WorkerOp>) => Promise<unknown>;
    app.on(method, route, async (c) => {
      const params = c.req.param() as Record<string, string>;
      const out = await handler({ c, sandboxId: params.sandboxId ?? "", params, query: queryOf(op, c.req.query()) });
      return out instanceof Response ? out : c.json(out as object, 200);
    });
  }
};
