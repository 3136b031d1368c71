import { randomBytes } from "node:crypto";
import {
  domainErrorOf,
  type Sandbox,
  UnavailableError,
  type WorkerRead,
  type WorkerReadQuery,
  workerPath,
} from "@tern/core";
import { type Database, deploymentSecretsRepository } from "@tern/db";
import { liveWorkers, type WorkerEndpoint } from "@tern/queue";
import type { Kysely } from "kysely";
import type { WorkerReadDeps } from "./deps.ts";

/**
 * THE API NEVER TALKS TO THE SANDBOX ENGINE. Commands that change a sandbox are jobs (sandboxes.ts);
 * reads that need one (a file now; a diff or a workspace archive later, streamed) are HTTP requests
 * to a worker's internal server (apps/worker/src/http/), which the API finds in the worker directory
 * (@tern/queue's worker-directory.ts) and authenticates to with the deployment's internal token.
 * The API then passes the worker's answer on, body streamed as it comes.
 */

const INTERNAL_TOKEN_SECRET = "worker_internal_token";
const DEFAULT_WORKER_TIMEOUT_MS = 30_000;

/**
 * The token of the workers' internal endpoints: WORKER_INTERNAL_TOKEN when configured, else the one
 * the deployment generated the first time a process asked (kept in Postgres, so every API replica
 * and every worker, on any host, reads the same without anyone configuring it).
 */
export const resolveInternalToken = async (db: Kysely<Database>, configured: string | undefined): Promise<string> =>
  configured ??
  (await deploymentSecretsRepository(db).getOrCreate(INTERNAL_TOKEN_SECRET, () =>
    randomBytes(32).toString("base64url"),
  ));

const shuffled = <T>(items: T[]): T[] => {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
};

/**
 * The workers among `live` that may serve a read of `sandbox`, in the order to try them (random, to
 * spread the load). The one place the choice is made: a sandbox with affinity is read through the
 * workers of its engine only (each advertises the engine it drives); one without, through any.
 */
export const workersInTryOrder = (live: WorkerEndpoint[], sandbox: Pick<Sandbox, "engineId">): WorkerEndpoint[] =>
  shuffled(sandbox.engineId ? live.filter((w) => w.engineId === sandbox.engineId) : live);

/** The live workers that may serve a read of `sandbox`, in the order to try them (workersInTryOrder). */
export const workersFor = async (
  deps: Pick<WorkerReadDeps, "redis" | "workerAccess">,
  sandbox: Pick<Sandbox, "engineId">,
) => workersInTryOrder(await liveWorkers(deps.redis, deps.workerAccess.prefix), sandbox);

/** A fetch ended by its deadline (or its own abort), not by the network. */
export const isAbort = (err: unknown) =>
  err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");

/**
 * A worker's answer that is not ok. A refused internal token is our own configuration's fault
 * (WORKER_INTERNAL_TOKEN set on some processes only): said loudly, and this returns, for the caller
 * to try the next worker. Any other refusal is thrown, as the domain error it names if it names one.
 */
export const refusedByWorker = async (
  logger: WorkerReadDeps["logger"],
  workerId: string,
  res: Response,
): Promise<void> => {
  const body = (await res.json().catch(() => null)) as {
    error?: { code?: unknown; message?: string; details?: unknown };
  } | null;
  const message = body?.error?.message ?? `the worker answered ${res.status}`;
  if (res.status === 401) {
    logger.error({ worker_id: workerId }, "a worker refused the internal token (WORKER_INTERNAL_TOKEN differs)");
    return;
  }
  const domain = domainErrorOf(body?.error?.code, message, body?.error?.details);
  if (domain) throw domain;
  throw new Error(`worker ${workerId} answered ${res.status}: ${message}`);
};

/**
 * One read of the workers' internal API (@tern/core's worker-api.ts) of `sandbox`, by a worker that
 * can serve it, and its answer, body unread so the caller may stream it.
 */
export const readFromWorker = <R extends WorkerRead>(
  deps: WorkerReadDeps,
  sandbox: Sandbox,
  read: R,
  query: WorkerReadQuery<R>,
  /** stream: the time limit covers the answer's headers only, so a long body (an archive) is never cut. */
  opts: { stream?: boolean } = {},
): Promise<Response> => fetchFromWorker(deps, sandbox, workerPath(read, sandbox.id, query), opts);

/**
 * GET `path` (with its query) of the internal server of a worker that can serve `sandbox`, and its
 * answer, body unread so the caller may stream it. Callers name a read (readFromWorker); the raw
 * path is for tests of the contract's refusals. A worker that cannot be reached (its entry
 * outlived it) is skipped for the next; none left is UnavailableError. A worker's refusal comes
 * back as the domain error its code names (a path outside the workspace: ForbiddenError, a bad
 * query: ValidationError, and so on), so the client gets the status the worker gave.
 */
export const fetchFromWorker = async (
  deps: WorkerReadDeps,
  sandbox: Sandbox,
  path: string,
  /** stream: the time limit covers the answer's headers only, so a long body (an archive) is never cut. */
  opts: { stream?: boolean } = {},
): Promise<Response> => {
  const candidates: WorkerEndpoint[] = await workersFor(deps, sandbox);
  const timeoutMs = deps.workerAccess.timeoutMs ?? DEFAULT_WORKER_TIMEOUT_MS;
  for (const worker of candidates) {
    let res: Response;
    const headersOnly = opts.stream ? new AbortController() : null;
    const timer = headersOnly
      ? setTimeout(() => headersOnly.abort(new DOMException("timed out", "TimeoutError")), timeoutMs)
      : undefined;
    try {
      res = await fetch(new URL(path, worker.url), {
        headers: { authorization: `Bearer ${deps.workerAccess.token}` },
        signal: headersOnly?.signal ?? AbortSignal.timeout(timeoutMs),
      });
      clearTimeout(timer);
    } catch (err) {
      clearTimeout(timer);
      if (isAbort(err)) throw new UnavailableError("The worker serving the sandbox did not answer in time");
      deps.logger.warn({ err, worker_id: worker.workerId, url: worker.url }, "worker unreachable; trying another");
      continue;
    }
    if (res.ok) return res;
    await refusedByWorker(deps.logger, worker.workerId, res);
  }
  throw new UnavailableError(
    sandbox.engineId && candidates.length === 0
      ? "No worker of the engine holding the sandbox is alive; try again shortly"
      : "No worker is reachable to serve the sandbox; try again shortly",
  );
};
