import type { StartRequest } from "@tern/core";
import { type SandboxDriver, SandboxLabel } from "@tern/sandbox";
import { removeSandboxesOfNamespace, type ServiceProcess, waitFor } from "@tern/testing";
import pg from "pg";
import { rssMiB } from "./load.ts";
import { createKey, spawnApi, spawnWorker } from "./services.ts";

export interface StartOutcome {
  taskId: string;
  /** POST sent → READY read, as the client sees it: the POST's answer when it said READY, else the first poll that did. */
  clientMs: number;
  /** created_at → updated_at of the READY task, as the database saw it. */
  serverMs: number;
  stageDurations: Record<string, number>;
  /** The sandbox it ran in (a `tern-pool-` name when the warm pool served it). */
  sandboxName: string | null;
  /** The POST's answer was READY (the API claimed a warm row, issue 23 §1): no polling. */
  answeredReady: boolean;
}

const POLL_MS = 3;

/**
 * One API process and `workers` worker processes on a database and Redis prefix of their own,
 * started through the real HTTP API and followed by polling the start-tasks lookup.
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
  const db = new pg.Client({ connectionString: opts.databaseUrl, options: "-c TimeZone=UTC" });
  await db.connect();

  /** `readyAt`: the answer itself said READY (a warm claim, issue 23 §1): the client has read it then. */
  const post = async (body: StartRequest): Promise<{ id: string; t0: number; readyAt?: number }> => {
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
    return { id: task.id, t0, ...(task.status === "READY" ? { readyAt: answeredAt } : {}) };
  };

  /** Starts whose POST answered READY are READY as of that answer; the rest are polled. */
  const answeredReady = (posted: { id: string; readyAt?: number }[]): Map<string, number> =>
    new Map(posted.flatMap((p) => (p.readyAt === undefined ? [] : [[p.id.replaceAll("-", ""), p.readyAt]])));

  const waitReady = async (
    ids: string[],
    timeoutMs: number,
    done: Map<string, number> = new Map(),
  ): Promise<Map<string, number>> => {
    const deadline = Date.now() + timeoutMs;
    while (done.size < ids.length) {
      const pending = ids.filter((id) => !done.has(id)).slice(0, 100);
      const qs = pending.map((id) => `ids=${id}`).join("&");
      const res = await fetch(`${api.url}/api/v1/app-conversations/start-tasks?${qs}`, { headers });
      const tasks = (await res.json()) as ({ id: string; status: string; detail: string | null } | null)[];
      const now = performance.now();
      for (const t of tasks) {
        if (!t) continue;
        if (t.status === "ERROR") throw new Error(`start ${t.id} failed: ${t.detail}`);
        if (t.status === "READY") done.set(t.id.replaceAll("-", ""), now);
      }
      if (done.size < ids.length) {
        if (Date.now() > deadline) throw new Error(`${ids.length - done.size} starts not READY in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    }
    return done;
  };

  const outcomes = async (posted: { id: string; t0: number; readyAt?: number }[], readyAt: Map<string, number>) => {
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
    return posted.map((p): StartOutcome => {
      const key = p.id.replaceAll("-", "");
      const row = byId.get(key);
      return {
        taskId: p.id,
        clientMs: (readyAt.get(key) ?? Number.NaN) - p.t0,
        serverMs: Number(row?.ms ?? Number.NaN),
        stageDurations: row?.stage_durations ?? {},
        sandboxName: row?.sandbox_name ?? null,
        answeredReady: p.readyAt !== undefined,
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
      const p = await post(body);
      const readyAt = await waitReady([p.id.replaceAll("-", "")], 60_000, answeredReady([p]));
      return (await outcomes([p], readyAt))[0] as StartOutcome;
    },
    /** `n` starts posted at once, followed to READY; also the span first POST → last READY. */
    async burst(n: number, body: (i: number) => StartRequest): Promise<{ outcomes: StartOutcome[]; spanMs: number }> {
      const posted = await Promise.all(Array.from({ length: n }, (_, i) => post(body(i))));
      const readyAt = await waitReady(
        posted.map((p) => p.id.replaceAll("-", "")),
        120_000 + n * 2_000,
        answeredReady(posted),
      );
      const first = Math.min(...posted.map((p) => p.t0));
      const last = Math.max(...readyAt.values());
      return { outcomes: await outcomes(posted, readyAt), spanMs: last - first };
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
          return post(body(i));
        }),
      );
      const readyAt = await waitReady(
        posted.map((p) => p.id.replaceAll("-", "")),
        120_000 + n * 2_000,
        answeredReady(posted),
      );
      return outcomes(posted, readyAt);
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
          // What a start can claim: the pools' unclaimed rows (issue 23 §1), not only running containers.
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
