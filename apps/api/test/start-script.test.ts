import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createDb, type DbHandle } from "@tern/db";
import {
  adminDatabaseUrl,
  containmentOptOut,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  freePort,
  removeSandboxesOfNamespace,
  repoRoot,
  type ScriptedLlmServer,
  sandboxesOfNamespace,
  scaled,
  startLlmServer,
  type TestDatabase,
  testRedisUrl,
  testSandboxNetworkName,
  waitFor,
} from "@tern/testing";
import { Redis } from "ioredis";
import { sql } from "kysely";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

/**
 * `./scripts/start.sh` as a user runs it: from a clean copy of the checkout (the files git tracks,
 * as a clone has them: no node_modules, no dist/, no .tern/), which the script installs and builds
 * itself. The first run uses no setting but the LLM; the supervision tests point it at resources of
 * their own, since what they prove is how the script ends, not the defaults.
 */

const run = promisify(execFile);

let copy: string;

beforeAll(() => {
  copy = mkdtempSync(join(tmpdir(), "tern-clean-copy-"));
  // Tracked and new (not ignored) files of the working tree: what a clone of this commit would hold.
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: repoRoot,
    encoding: "buffer",
    maxBuffer: 64 * 1024 * 1024,
  });
  execFileSync("bash", ["-c", `tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -x -C "$1"`, "_", copy], {
    cwd: repoRoot,
    input: files,
  });
});

// The copy holds a whole node_modules: removing it takes a while on a busy disk.
afterAll(async () => {
  for (const pid of processesOf(copy)) process.kill(pid, "SIGKILL");
  await rm(copy, { recursive: true, force: true });
}, scaled(300_000));

interface Script {
  child: ChildProcess;
  pid: number;
  output: () => string;
  /** The script's exit code (a signal that ended it: 128 + its number). */
  exited: Promise<number>;
}

/**
 * Runs the copy's start.sh with exactly `env` (nothing of this process's environment), in a
 * session of its own, as a terminal would: Ctrl-C is SIGINT to that whole process group.
 */
const startScript = (env: Record<string, string>): Script => {
  // The script itself, through its shebang, as `./scripts/start.sh` runs it.
  const child = spawn(join(copy, "scripts", "start.sh"), [], {
    cwd: copy,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d) => (out += d));
  child.stderr?.on("data", (d) => (out += d));
  // "exit", not "close": a process the script leaves behind would hold its output open.
  const exited = new Promise<number>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? 128 + (signal === "SIGKILL" ? 9 : 15))),
  );
  return { child, pid: child.pid ?? 0, output: () => out, exited };
};

/** The user's own environment: a PATH and a HOME (pnpm's store is under it), nothing tests set. */
const userEnv = (): Record<string, string> => ({
  PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
  HOME: process.env.HOME ?? "/root",
});

/** Every process running in `dir` (its cwd there): the script, its node processes, anything they left. */
const processesOf = (dir: string): number[] =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)
    .flatMap((p) => {
      try {
        const cwd = readlinkSync(`/proc/${p}/cwd`);
        return cwd === dir || cwd.startsWith(`${dir}/`) ? [Number(p)] : [];
      } catch {
        return [];
      }
    });

const commandOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
};

/** Parent pid of every process. */
const parents = (): Map<number, number> =>
  new Map(
    readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .flatMap((p) => {
        try {
          // comm may hold spaces and parentheses: the fields after its closing parenthesis are fixed.
          const stat = readFileSync(`/proc/${p}/stat`, "utf8");
          return [[Number(p), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])] as [number, number]];
        } catch {
          return [];
        }
      }),
  );

/**
 * The script's node process running `entry` (apps/api/dist/main.js, apps/worker/dist/main.js): a
 * child of the script, or deeper (a subshell between them is the defect the supervision tests catch).
 */
const processRunning = (script: Script, entry: string): number => {
  const ppid = parents();
  const descends = (pid: number): boolean => {
    for (let p = ppid.get(pid); p && p > 1; p = ppid.get(p)) if (p === script.pid) return true;
    return false;
  };
  const pid = [...ppid.keys()].find(
    (p) => descends(p) && commandOf(p).startsWith("node ") && commandOf(p).includes(entry),
  );
  if (!pid) throw new Error(`no process of the script runs ${entry}`);
  return pid;
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const answers = async (url: string): Promise<boolean> => (await fetch(url).catch(() => null))?.ok === true;

/** Both processes up: the API's /health and the worker's own /health answer. */
const waitUntilServing = async (script: Script, apiUrl: string, workerUrl: string, timeoutMs = 240_000) =>
  waitFor(
    async () => {
      if (script.child.exitCode !== null)
        throw new Error(`start.sh exited ${script.child.exitCode}:\n${script.output()}`);
      return (await answers(`${apiUrl}/health`)) && (await answers(`${workerUrl}/health`));
    },
    { what: "start.sh's API and worker to answer /health", timeoutMs, detail: () => script.output().slice(-4000) },
  );

/** What a user sets to run an agent at all: their LLM (here our scripted one on loopback). */
const userLlmEnv = (llm: ScriptedLlmServer): Record<string, string> => {
  const { LLM_PROVIDER, LLM_BASE_URL, LLM_API_KEY, LLM_MODEL } = llm.workerEnv("openai");
  return { LLM_PROVIDER: LLM_PROVIDER!, LLM_BASE_URL: LLM_BASE_URL!, LLM_API_KEY: LLM_API_KEY!, LLM_MODEL: LLM_MODEL! };
};

/**
 * The defaults a first run takes on this machine: the database, Redis prefix (also the namespace
 * label of its sandboxes), ports and sandbox network of the README's configuration table.
 */
const DEFAULTS = {
  database: "tern",
  namespace: "tern",
  apiPort: 3000,
  workerPort: 3001,
  network: "tern-sandboxes",
} as const;

const portTaken = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

const withAdmin = async <T>(fn: (db: DbHandle["db"]) => Promise<T>, database = "postgres"): Promise<T> => {
  const u = new URL(adminDatabaseUrl());
  u.pathname = `/${database}`;
  const handle = createDb(u.toString(), { max: 1 });
  try {
    return await fn(handle.db);
  } finally {
    await handle.close();
  }
};

const databaseExists = (name: string) =>
  withAdmin(async (db) => (await sql`select 1 from pg_database where datname = ${name}`.execute(db)).rows.length > 0);

const redisKeysUnder = async (prefix: string): Promise<number> => {
  const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
  try {
    const [, keys] = await redis.scan("0", "MATCH", `${prefix}:*`, "COUNT", 10_000);
    return keys.length;
  } finally {
    redis.disconnect();
  }
};

/** The bridge of a Docker network, as the worker names it for its egress chains; null when there is no such network. */
const bridgeOf = async (network: string): Promise<string | null> => {
  const { stdout } = await run("docker", [
    "network",
    "inspect",
    "--format",
    '{{.Id}} {{with index .Options "com.docker.network.bridge.name"}}{{.}}{{end}}',
    network,
  ]).catch(() => ({ stdout: "" }));
  const [id, named] = stdout.trim().split(" ");
  if (!id) return null;
  return named || `br-${id.slice(0, 12)}`;
};

const egressChainsOf = (bridge: string) => [
  ["DOCKER-USER", `TERN-EGRESS-${bridge}`],
  ["INPUT", `TERN-INPUT-${bridge}`],
];

const chainExists = async (chain: string): Promise<boolean> =>
  run("iptables", ["-w", "-S", chain]).then(
    () => true,
    () => false,
  );

/** Removes the worker's egress chains of `bridge` (and their jumps) in both address families. */
const removeEgressChains = async (bridge: string) => {
  for (const iptables of ["iptables", "ip6tables"]) {
    for (const [parent, chain] of egressChainsOf(bridge)) {
      const ipt = (...args: string[]) =>
        run(iptables, ["-w", ...args]).then(
          () => true,
          () => false,
        );
      while (await ipt("-D", parent!, "-i", bridge, "-j", chain!));
      if (await ipt("-F", chain!)) await ipt("-X", chain!);
    }
  }
};

/** The part of the worker's /ready that says what holds its sandboxes in. */
interface ContainmentFacts {
  disk: { mode: string; limitMb: number | null };
  egress: { mode: string } | null;
}

interface StartTask {
  id: string;
  status: string;
  detail: string | null;
  app_conversation_id: string | null;
}

describe("the first run, as a user runs it", () => {
  let llm: ScriptedLlmServer;
  let script: Script | undefined;
  const before = { database: false, network: false, chains: false };

  beforeAll(async () => {
    llm = await startLlmServer();
  });

  afterAll(async () => {
    await llm?.close();
  });

  // Each try (CI retries a failed test once) starts from free defaults and gives them back.
  beforeEach(async () => {
    // This machine's defaults must be free: a first run takes them, and this test gives them back.
    for (const port of [DEFAULTS.apiPort, DEFAULTS.workerPort]) {
      if (await portTaken(port)) throw new Error(`port ${port} is in use: the first run needs the default ports`);
    }
    before.database = await databaseExists(DEFAULTS.database);
    if (before.database) {
      const tables = await withAdmin(
        async (db) =>
          (
            await sql<{
              n: number;
            }>`select count(*)::int as n from information_schema.tables where table_schema = 'public'`.execute(db)
          ).rows[0]?.n ?? 0,
        DEFAULTS.database,
      );
      if (tables > 0) {
        throw new Error(
          `database ${DEFAULTS.database} holds ${tables} tables: a deployment on this machine's defaults uses it (drop it to run the first-run test)`,
        );
      }
    }
    if ((await redisKeysUnder(DEFAULTS.namespace)) > 0) {
      throw new Error(`Redis has keys under ${DEFAULTS.namespace}: (a deployment on this machine's defaults)`);
    }
    if ((await sandboxesOfNamespace(DEFAULTS.namespace)).length > 0) {
      throw new Error(`sandboxes of namespace ${DEFAULTS.namespace} exist (a deployment on this machine's defaults)`);
    }
    const bridge = await bridgeOf(DEFAULTS.network);
    before.network = bridge !== null;
    before.chains = bridge !== null && (await chainExists(`TERN-EGRESS-${bridge}`));
  });

  afterEach(async () => {
    if (script && script.child.exitCode === null) {
      process.kill(-script.pid, "SIGKILL");
      await script.exited;
    }
    for (const pid of processesOf(copy)) process.kill(pid, "SIGKILL");
    llm.clear();
    // What the run made: its sandboxes, its queues, its database, its network and egress rules.
    await removeSandboxesOfNamespace(DEFAULTS.namespace);
    await deleteRedisPrefix(DEFAULTS.namespace);
    await withAdmin(async (db) => {
      await sql`drop database if exists ${sql.id(DEFAULTS.database)} with (force)`.execute(db);
      if (before.database) await sql`create database ${sql.id(DEFAULTS.database)}`.execute(db);
    });
    const bridge = await bridgeOf(DEFAULTS.network);
    if (bridge && !before.chains) await removeEgressChains(bridge);
    if (bridge && !before.network) await run("docker", ["network", "rm", DEFAULTS.network]).catch(() => undefined);
  });

  it(
    "installs, builds, serves a conversation whose agent runs a command, and Ctrl-C leaves nothing running",
    async () => {
      llm.push(
        { toolCalls: [{ name: "terminal", arguments: { command: "echo first-run $((6 * 7))" } }] },
        { text: "Six times seven is 42." },
      );
      script = startScript({ ...userEnv(), ...userLlmEnv(llm) });
      const url = `http://localhost:${DEFAULTS.apiPort}`;
      const started = script;
      await waitFor(
        async () => {
          if (started.child.exitCode !== null)
            throw new Error(`start.sh exited ${started.child.exitCode}:\n${started.output()}`);
          return answers(`${url}/health`);
        },
        { what: "start.sh's API to answer /health", timeoutMs: 300_000, detail: () => started.output().slice(-4000) },
      );
      const key = await waitFor(
        () => /First admin API key \(shown once, keep it safe\): (\S+)/.exec(started.output())?.[1],
        { what: "the first admin key", timeoutMs: 30_000, detail: () => started.output().slice(-4000) },
      );
      const call = async <T>(path: string, init: { method?: string; json?: unknown } = {}): Promise<T> => {
        const res = await fetch(`${url}${path}`, {
          method: init.method ?? "GET",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
        });
        const text = await res.text();
        if (!res.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${res.status} ${text}`);
        return JSON.parse(text) as T;
      };

      // With no setting the containment is on, as far as this engine allows: a disk limit of either
      // kind (hard on a data root with quotas, watched on overlay2 over ext4) and the egress rules.
      const ready = await waitFor(
        async () => {
          const res = await fetch(`http://localhost:${DEFAULTS.workerPort}/ready`).catch(() => null);
          return res?.ok ? ((await res.json()) as { containment: ContainmentFacts | null }) : null;
        },
        { what: "the worker to be ready", timeoutMs: 120_000, detail: () => started.output().slice(-4000) },
      );
      expect(["hard", "watched"]).toContain(ready.containment?.disk.mode);
      expect(ready.containment?.disk.limitMb).toBe(10240);
      expect(ready.containment?.egress?.mode).toBe("public");

      const task = await call<StartTask>("/api/v1/app-conversations", {
        method: "POST",
        json: { initial_message: { content: [{ type: "text", text: "What is six times seven? Ask the shell." }] } },
      });
      const conversationId = await waitFor(
        async () => {
          const [t] = await call<(StartTask | null)[]>(`/api/v1/app-conversations/start-tasks?ids=${task.id}`);
          if (t?.status === "ERROR") throw new Error(`the start failed: ${t.detail}\n${started.output().slice(-4000)}`);
          return t?.status === "READY" && t.app_conversation_id;
        },
        { what: "the start task to be READY", timeoutMs: 180_000, detail: () => started.output().slice(-4000) },
      );
      await waitFor(
        async () => {
          const [c] = await call<({ execution_status: string } | null)[]>(
            `/api/v1/app-conversations?ids=${conversationId}`,
          );
          if (c?.execution_status === "error") throw new Error(`the run failed:\n${started.output().slice(-4000)}`);
          return c?.execution_status === "finished";
        },
        { what: "the agent to finish", timeoutMs: 120_000, detail: () => started.output().slice(-4000) },
      );
      const { items } = await call<{ items: { kind: string; source: string }[] }>(
        `/api/v1/conversation/${conversationId}/events/search?limit=100`,
      );
      const observation = items.find((e) => e.kind === "ObservationEvent");
      expect(JSON.stringify(observation)).toContain("first-run 42");
      const answer = items.filter((e) => e.kind === "MessageEvent" && e.source === "agent").at(-1);
      expect(JSON.stringify(answer)).toContain("Six times seven is 42.");

      // Ctrl-C in the terminal: SIGINT to the whole foreground process group.
      process.kill(-started.pid, "SIGINT");
      expect(await started.exited, started.output().slice(-4000)).toBe(0);
      await waitFor(() => processesOf(copy).length === 0, {
        what: "no process of start.sh left",
        timeoutMs: 10_000,
        detail: () => processesOf(copy).map(commandOf).join("\n"),
      });
      expect(await portTaken(DEFAULTS.apiPort)).toBe(false);
      expect(await portTaken(DEFAULTS.workerPort)).toBe(false);
    },
    scaled(600_000),
  );
});

describe("start.sh supervises the API and the worker", () => {
  let database: TestDatabase;
  const prefix = createRedisPrefix();

  beforeAll(async () => {
    database = await createTestDatabase();
  });

  afterAll(async () => {
    await removeSandboxesOfNamespace(prefix);
    await deleteRedisPrefix(prefix);
    await database?.drop();
  });

  /** start.sh on this file's own database, Redis prefix, ports and sandbox network, no warm pool. */
  const startSupervised = async () => {
    const [port, workerPort] = [await freePort(), await freePort()];
    const script = startScript({
      ...userEnv(),
      DATABASE_URL: database.url,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      PORT: String(port),
      WORKER_HTTP_PORT: String(workerPort),
      SANDBOX_NETWORK: testSandboxNetworkName(),
      SANDBOX_POOL_SIZE: "0",
      // The egress rules and disk limits are not what this proves (the first run below has them on).
      ...containmentOptOut,
      LOG_LEVEL: "warn",
    });
    await waitUntilServing(script, `http://127.0.0.1:${port}`, `http://127.0.0.1:${workerPort}`);
    return {
      script,
      api: processRunning(script, "apps/api/dist/main.js"),
      worker: processRunning(script, "apps/worker/dist/main.js"),
    };
  };

  /** The script ended, and no process of it is left in the copy. */
  const ended = async (script: Script) => {
    const code = await script.exited;
    await waitFor(() => processesOf(copy).length === 0, {
      what: "no process of start.sh left",
      timeoutMs: 10_000,
      detail: () => processesOf(copy).map(commandOf).join("\n"),
    });
    return code;
  };

  it(
    "the worker killed: the API is stopped, and the script exits non-zero naming the worker",
    async () => {
      const { script, api, worker } = await startSupervised();
      process.kill(worker, "SIGKILL");
      const code = await ended(script);
      expect(code, script.output()).not.toBe(0);
      expect(script.output()).toContain("the worker exited (killed by SIGKILL); stopping the API");
      expect(alive(api)).toBe(false);
    },
    scaled(300_000),
  );

  it(
    "the API killed: the worker is stopped, and the script exits non-zero naming the API",
    async () => {
      const { script, api, worker } = await startSupervised();
      process.kill(api, "SIGKILL");
      const code = await ended(script);
      expect(code, script.output()).not.toBe(0);
      expect(script.output()).toContain("the API exited (killed by SIGKILL); stopping the worker");
      expect(alive(worker)).toBe(false);
    },
    scaled(300_000),
  );

  it(
    "SIGTERM to the script alone stops both, and it exits 0",
    async () => {
      const { script, api, worker } = await startSupervised();
      process.kill(script.pid, "SIGTERM");
      const code = await ended(script);
      expect(code, script.output()).toBe(0);
      expect(script.output()).toContain("stopping API and worker (SIGTERM)");
      expect(alive(api) || alive(worker)).toBe(false);
    },
    scaled(300_000),
  );
});
