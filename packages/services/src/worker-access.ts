import { randomBytes } from "node:crypto";
import {
  domainErrorOf,
  isDomainError,
  type Sandbox,
  UnavailableError,
  type WorkerOp,
  type WorkerParams,
  type WorkerQuery,
  type WorkerResult,
  type WorkerResultOp,
  workerApi,
  workerPath,
} from "@tern/core";
import { type Database, deploymentSecretsRepository } from "@tern/db";
import { liveWorkers, type WorkerEndpoint } from "@tern/queue";
import type { Kysely } from "kysely";
import type { WorkerReadDeps } from "./deps.ts";

/**
 * THE API NEVER TALKS TO THE SANDBOX ENGINE. Commands that change a sandbox are jobs (sandboxes.ts);
 * what needs one (a file, the diff, the workspace archive; the agent server's bash, files and git)
 * is an operation of the workers' internal API (@tern/core's worker-api.ts), asked by HTTP of a
 * worker's internal server (apps/worker/src/http/), which the API finds in the worker directory
 * (@tern/queue's worker-directory.ts) and authenticates to with the deployment's internal token.
 * `callWorker` is the one client; the API passes the worker's answer on, body streamed as it comes.
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
 * The workers among `live` that may serve `sandbox`, in the order to try them (random, to spread
 * the load). The one place the choice is made: a sandbox with affinity is served by the workers of
 * its engine only (each advertises the engine it drives); one without, by any.
 */
const workersInTryOrder = (live: WorkerEndpoint[], sandbox: Pick<Sandbox, "engineId">): WorkerEndpoint[] =>
  shuffled(sandbox.engineId ? live.filter((w) => w.engineId === sandbox.engineId) : live);

/**
 * How long this process reuses its read of the worker directory (two Redis round trips per
 * operation otherwise: a bash poll storm would be that many). A worker gone since is found
 * unreachable, and the directory read afresh.
 */
const WORKERS_CACHE_MS = 1_000;
const workersCache = new WeakMap<object, { at: number; workers: Promise<WorkerEndpoint[]> }>();

const forgetWorkers = (deps: Pick<WorkerReadDeps, "redis">) => workersCache.delete(deps.redis);

/** The workers that can serve the sandbox, in the order to try them, from the cache unless `fresh`. */
const workersOf = async (
  deps: Pick<WorkerReadDeps, "redis" | "workerAccess">,
  sandbox: Pick<Sandbox, "engineId">,
  fresh: boolean,
): Promise<WorkerEndpoint[]> => {
  const now = Date.now();
  let entry = workersCache.get(deps.redis);
  if (fresh || !entry || now - entry.at > WORKERS_CACHE_MS) {
    const workers = liveWorkers(deps.redis, deps.workerAccess.prefix);
    entry = { at: now, workers };
    workersCache.set(deps.redis, entry);
    workers.catch(() => forgetWorkers(deps));
  }
  return workersInTryOrder(await entry.workers, sandbox);
};

/** A fetch ended by its deadline (or its own abort), not by the network. */
const isAbort = (err: unknown) => err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");

/**
 * A worker's answer that is not ok. A refused internal token is our own configuration's fault
 * (WORKER_INTERNAL_TOKEN set on some processes only): said loudly, and this returns, for the caller
 * to try the next worker. Any other refusal is thrown, as the domain error it names if it names one.
 */
const refusedByWorker = async (logger: WorkerReadDeps["logger"], workerId: string, res: Response): Promise<void> => {
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

export interface WorkerCall<O extends WorkerOp> {
  /** The route's parameters beside the sandbox's id (a bash command's id). */
  params?: Omit<WorkerParams<O>, "sandboxId">;
  /** A body, streamed to the worker (an upload). It can be sent once: one worker is tried. */
  body?: ReadableStream<Uint8Array>;
  /** How long the worker may take; `workerAccess.timeoutMs` (30 s) unless given. */
  timeoutMs?: number;
  /** The time limit covers the answer's headers only, so a long body (an archive) is never cut. */
  stream?: boolean;
}

/**
 * One operation of the workers' internal API on `sandbox`, asked of a worker that can serve it; its
 * answer, body unread so the caller may stream it (workerResult parses one the contract types).
 * The directory is read as cached within WORKERS_CACHE_MS first, then, every one of those
 * unreachable (an entry that outlived its worker), afresh; none left is UnavailableError. A
 * worker's refusal comes back as the domain error its code names (a path outside the workspace:
 * ForbiddenError, a bad query: ValidationError, and so on), so the client gets the status the
 * worker gave.
 */
export const callWorker = async <O extends WorkerOp>(
  deps: WorkerReadDeps,
  sandbox: Pick<Sandbox, "id" | "engineId">,
  op: O,
  query: WorkerQuery<O>,
  call: WorkerCall<O> = {},
): Promise<Response> => {
  const { method } = workerApi[op];
  const path = workerPath(op, { ...call.params, sandboxId: sandbox.id } as WorkerParams<O>, query);
  const timeoutMs = call.timeoutMs ?? deps.workerAccess.timeoutMs ?? DEFAULT_WORKER_TIMEOUT_MS;
  const tried = new Set<string>();
  let candidates = 0;
  for (const fresh of call.body ? [true] : [false, true]) {
    const workers = (await workersOf(deps, sandbox, fresh)).filter((w) => !tried.has(w.workerId));
    candidates = Math.max(candidates, workers.length + tried.size);
    for (const worker of call.body ? workers.slice(0, 1) : workers) {
      tried.add(worker.workerId);
      const headersOnly = call.stream || call.body ? new AbortController() : null;
      const timer = headersOnly
        ? setTimeout(() => headersOnly.abort(new DOMException("timed out", "TimeoutError")), timeoutMs)
        : undefined;
      let res: Response;
      try {
        res = await fetch(new URL(path, worker.url), {
          method,
          headers: {
            authorization: `Bearer ${deps.workerAccess.token}`,
            ...(call.body ? { "content-type": "application/octet-stream" } : {}),
          },
          ...(call.body ? { body: call.body, duplex: "half" } : {}),
          signal: headersOnly?.signal ?? AbortSignal.timeout(timeoutMs),
        } as RequestInit);
      } catch (err) {
        if (isAbort(err)) throw new UnavailableError("The worker serving the sandbox did not answer in time");
        // An upload's own refusal (over the cap) aborts the body: that error is the one to answer.
        const cause = (err as { cause?: unknown }).cause;
        if (isDomainError(cause)) throw cause;
        if (isDomainError(err)) throw err;
        forgetWorkers(deps);
        deps.logger.warn({ err, worker_id: worker.workerId, url: worker.url }, "worker unreachable; trying another");
        continue;
      } finally {
        clearTimeout(timer);
      }
      if (res.ok) return res;
      await refusedByWorker(deps.logger, worker.workerId, res);
    }
  }
  throw new UnavailableError(
    sandbox.engineId && candidates === 0
      ? "No worker of the engine holding the sandbox is alive; try again shortly"
      : "No worker is reachable to serve the sandbox; try again shortly",
  );
};

/** The answer of an operation whose result the contract types, parsed by its schema. */
export const workerResult = async <O extends WorkerResultOp>(op: O, res: Response): Promise<WorkerResult<O>> =>
  workerApi[op].result.parse(await res.json()) as WorkerResult<O>;
