import type { StartRequest } from "@tern/core";
import { type SandboxDriver, SandboxLabel } from "@tern/sandbox";
import { removeSandboxesOfNamespace, type ServiceProcess, waitFor } from "@tern/testing";
import pg from "pg";
import { rssMiB } from "./load.ts";
import { createKey, spawnApi, spawnWorker } from "./services.ts";

/** A start as posted, and the moment its READY was read. */
interface Posted {
  id: string;
  /** When the POST was sent. */
  t0: number;
  answeredReady: boolean;
  ready: Promise<number>;
}

export interface StartOutcome {
  taskId: string;
  /** POST sent → READY read, as the client sees it: the POST's answer when it said READY, else the READY frame of its stage stream. */
  clientMs: number;
  /** created_at → updated_at of the READY task, as the database saw it. */
  serverMs: number;
  stageDurations: Record<string, number>;
  /** The sandbox it ran in (a `tern-pool-` name when the warm pool served it). */
  sandboxName: string | null;
  /** The POST's answer was READY (the API claimed a warm row): no stream followed. */
  answeredReady: boolean;
}

/**
 * One API process and `workers` worker processes on a database and Redis prefix of their own,
 * started through the real HTTP API and followed on each start's stage stream.
 */
export const startDeployment = async (opts: {
  databaseUrl: string;
  prefix: string;
  workers: number;
  poolSize: number;
  env?: Record<string, string>;
  /** On top of `env` for worker `i` (e.g. another engine's DOCKER_HOST). */
  workerEnv?: (i: number) => Record<string, string>;
}) => {
  const api = await spawnApi(opts.databaseUrl, opts.prefix);
  const workerEnv = { SANDBOX_POOL_SIZE: String(opts.poolSize), ...opts.env };
  const workers: ServiceProcess[] = [];
  try {
    for (let i = 0; i < opts.workers; i++) {
      workers.push(await spawnWorker(opts.databaseUrl, opts.prefix, { ...workerEnv, ...opts.workerEnv?.(i) }));
    }
  } catch (err) {
    await Promise.all([api.stop(), ...workers.map((w) => w.stop())]);
    throw err;
  }
  const { key } = await createKey(opts.databaseUrl, { admin: true });
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  // A pool: removeAll's sandboxes each wait on their snapshot row at once, and one client would
  // queue their queries (deprecated in pg, and a removal would wait behind another's poll).
  const db = new pg.Pool({ connectionString: opts.databaseUrl, options: "-c TimeZone=UTC", max: 4 });

  /**
   * Follows one start on its stage stream (GET …/start-tasks/{id}/stream: a frame as each stage commits,
   * woken by Postgres' notification) and gives the moment READY was read. A client polling the lookup
   * every few ms would learn of READY about as soon, but its requests compete with the start itself
   * for the machine's cores.
   */
  const followToReady = async (id: string, deadline: number): Promise<number> => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), Math.max(0, deadline - Date.now()));
    try {
      const res = await fetch(`${api.url}/api/v1/app-conversations/start-tasks/${id}/stream`, {
        headers,
        signal: abort.signal,
      });
      if (res.status !== 200 || !res.body) throw new Error(`the stream of start ${id} answered ${res.status}`);
      const decoder = new TextDecoder();
      let buffered = "";
      const reader = res.body.getReader();
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        buffered += decoder.decode(read.value, { stream: true });
        for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
          const frame = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const status = /^id: (.*)$/m.exec(frame)?.[1];
          if (status === "READY") return performance.now();
          if (status === "ERROR") {
            const data = JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "{}") as { detail?: string };
            throw new Error(`start ${id} failed: ${data.detail}`);
          }
        }
      }
      throw new Error(`the stream of start ${id} ended before READY`);
    } catch (err) {
      if (abort.signal.aborted) throw new Error(`start ${id} not READY by its deadline`);
      throw err;
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  };

  /**
   * One start posted; `ready` is the moment the client read READY: the answer itself when it said so
   * (a warm claim), else the READY frame of the stage stream it follows from then on.
   */
  const post = async (body: StartRequest, timeoutMs: number): Promise<Posted> => {
    const t0 = performance.now();
    const res = await fetch(`${api.url}/api/v1/app-conversations`, {
      method: "POST",
      headers,
      // No initial message: as in OpenHands, one always starts the agent, and these rows measure
      // the start alone (the agent's cost is the append rows').
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`start answered ${res.status}: ${text.slice(0, 300)}`);
    const answeredAt = performance.now();
    const task = JSON.parse(text) as { id: string; status: string };
    const answeredReady = task.status === "READY";
    const ready = answeredReady ? Promise.resolve(answeredAt) : followToReady(task.id, Date.now() + timeoutMs);
    // Awaited by `outcomes`; a failure meanwhile is not an unhandled one.
    ready.catch(() => undefined);
    return { id: task.id, t0, answeredReady, ready };
  };

  const outcomes = async (posted: Posted[]) => {
    const readyAt = await Promise.all(posted.map((p) => p.ready));
    const r = await db.query<{
      id: string;
      ms: number;
      stage_durations: Record<string, number>;
      sandbox_name: string | null;
    }>(
      `select t.id, extract(epoch from (t.updated_at - t.created_at)) * 1000 as ms, t.stage_durations, s.name as sandbox_name
       from start_tasks t left join sandboxes s on s.id = t.sandbox_id where t.id = any($1::uuid[])`,
      [posted.map((p) => p.id)],
    );
    const byId = new Map(r.rows.map((x) => [x.id.replaceAll("-", ""), x]));
    return posted.map((p, i): StartOutcome => {
      const row = byId.get(p.id.replaceAll("-", ""));
      return {
        taskId: p.id,
        clientMs: (readyAt[i] ?? Number.NaN) - p.t0,
        serverMs: Number(row?.ms ?? Number.NaN),
        stageDurations: row?.stage_durations ?? {},
        sandboxName: row?.sandbox_name ?? null,
        answeredReady: p.answeredReady,
      };
    });
  };

  return {
    api,
    workers,
    /** The deployment's Redis prefix, also its sandboxes' (and snapshot images') namespace label. */
    prefix: opts.prefix,
    /** One start, followed to READY. */
    async startOne(body: StartRequest): Promise<StartOutcome> {
      return (await outcomes([await post(body, 60_000)]))[0] as StartOutcome;
    },
    /** `n` starts posted at once, followed to READY; also the span first POST → last READY. */
    async burst(n: number, body: (i: number) => StartRequest): Promise<{ outcomes: StartOutcome[]; spanMs: number }> {
      const posted = await Promise.all(Array.from({ length: n }, (_, i) => post(body(i), 120_000 + n * 2_000)));
      const first = Math.min(...posted.map((p) => p.t0));
      const last = Math.max(...(await Promise.all(posted.map((p) => p.ready))));
      return { outcomes: await outcomes(posted), spanMs: last - first };
    },
    /**
     * `n` starts posted one every `intervalMs` (an open loop: each goes at its time, whether the
     * earlier ones are READY or not), followed to READY.
     */
    async paced(n: number, intervalMs: number, body: (i: number) => StartRequest): Promise<StartOutcome[]> {
      const t0 = performance.now();
      const posted = await Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const wait = t0 + i * intervalMs - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          return post(body(i), 120_000 + n * 2_000);
        }),
      );
      return outcomes(posted);
    },
    /**
     * Removes a start's sandbox once the start's own work in it is done: a repository snapshot's
     * commit runs on after READY (the agent's calls wait for it), and removing the sandbox under it
     * would lose the snapshot. The next sample then meets no commit of this one's either.
     */
    async removeSandbox(sandboxes: SandboxDriver, name: string | null) {
      if (!name) return;
      await waitFor(
        async () =>
          (await db.query("select 1 from repo_snapshots where source_sandbox = $1 and image = ''", [name])).rowCount ===
          0,
        { what: `the snapshot commit of ${name}`, timeoutMs: 120_000, intervalMs: 10 },
      );
      await sandboxes.destroy(name).catch(() => undefined);
    },
    /**
     * Waits until the workers' pools hold `n` warm sandboxes (running, unclaimed, and made at
     * least `settledMs` ago, so their warm-up exec is done), with as many claimable rows. The starts' own sandboxes must be
     * removed first: claimed ones keep their pool labels.
     */
    async waitWarm(sandboxes: SandboxDriver, n: number, settledMs = 1_000, timeoutMs = 60_000) {
      let warm = 0;
      return waitFor(
        async () => {
          const containers = (
            await sandboxes.list({ [SandboxLabel.Namespace]: opts.prefix, [SandboxLabel.Pool]: "1" })
          ).filter((c) => c.state === "running" && Date.now() - Date.parse(c.createdAt) >= settledMs).length;
          // What a start can claim: the pools' unclaimed rows, not only running containers.
          const rows = await db.query<{ n: number }>(
            "select count(*)::int as n from warm_sandboxes where claimed_at is null",
          );
          warm = Math.min(containers, rows.rows[0]?.n ?? 0);
          return warm >= n && warm;
        },
        { what: `${n} warm sandboxes in the pool`, timeoutMs, intervalMs: 100, detail: () => `${warm} warm` },
      );
    },
    async workerRss(): Promise<number[]> {
      return Promise.all(workers.map((w) => rssMiB(w.pid)));
    },
    async stop() {
      await db.end();
      await Promise.all(workers.map((w) => w.stop()));
      await api.stop();
      await removeSandboxesOfNamespace(opts.prefix);
    },
  };
};

export type Deployment = Awaited<ReturnType<typeof startDeployment>>;

/** Docker time of a start: the stages that talk to the engine (container, clone, scripts, hooks, skills). */
const DOCKER_STAGES = [
  "WAITING_FOR_SANDBOX",
  "PREPARING_REPOSITORY",
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "SETTING_UP_SKILLS",
] as const;

export const dockerMs = (o: StartOutcome): number =>
  DOCKER_STAGES.reduce((sum, s) => sum + (o.stageDurations[s] ?? 0), 0);
