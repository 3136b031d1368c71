import { parseId } from "@tern/core";
import { createRedis } from "@tern/queue";
import {
  type ApiClient,
  type EventView,
  type ServiceProcess,
  scaled,
  startStack,
  type TestStack,
  testRedisUrl,
  waitFor,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * A run lives in Postgres until it ends; Redis only carries a copy of it. An operator's view: the
 * API and two supervised workers (a worker killed with SIGKILL is started again under its own id,
 * as a supervisor would), rounds of starts with an initial message (warm-claimed starts without a
 * repository, and starts with one, which go through the queue), Redis' data lost at random moments
 * while they are in flight, and a worker killed in each round. Every run answers exactly once, and
 * none is stranded.
 */
let stack: TestStack;
let client: ApiClient;
let flusher: Redis;

/**
 * Two rounds kill each worker once; the losses' moments are random, so each run of the suite tries
 * others. TERN_DURABILITY_ROUNDS runs the long version (the issue's five rounds, twenty losses).
 */
const ROUNDS = Number(process.env.TERN_DURABILITY_ROUNDS ?? 2);
const FLUSHES_PER_ROUND = 4;
const WARM_PER_ROUND = 2;
const QUEUED_PER_ROUND = 2;
/** Where, from a round's beginning, its starts are posted and its losses and its kill happen (ms). */
const POST_WITHIN_MS = 2_500;
const CHAOS_WITHIN_MS = 5_000;
const REPO = "acme/run-durability";

const WORKER_ENV = {
  SANDBOX_POOL_SIZE: "2",
  WORKER_CONCURRENCY: "2",
  JANITOR_INTERVAL_MS: "1000",
  // A killed worker's jobs are seen stalled within seconds.
  WORKER_LOCK_DURATION_MS: "3000",
  WORKER_STALLED_INTERVAL_MS: "1000",
  WORKER_SHUTDOWN_GRACE_MS: "5000",
};

/**
 * Every key of the stack's prefix deleted at once (one script: no client writes between two
 * deletions), as a FLUSHDB, a failover to an empty replica or a restart without persistence would.
 */
const FLUSH_PREFIX = `
  local keys = redis.call("KEYS", ARGV[1])
  for i = 1, #keys, 500 do
    redis.call("DEL", unpack(keys, i, math.min(i + 499, #keys)))
  end
  return #keys`;

let flushes = 0;
const loseRedisData = async () => {
  await flusher.eval(FLUSH_PREFIX, 0, `${stack.prefix}:*`);
  flushes++;
};

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const at = (within: number) => Math.floor(Math.random() * within);

/** Two workers, each started again under its own id once killed. */
const workers = new Map<string, ServiceProcess>();
const startWorker = async (id: string) => {
  workers.set(id, await stack.startWorker({ ...WORKER_ENV, WORKER_ID: id }));
};
const killAndRestart = async (id: string) => {
  await workers.get(id)?.kill();
  await startWorker(id);
};

interface Started {
  kind: "warm" | "queued";
  marker: string;
  taskId: string;
  /** The answer to the POST (a warm claim answers READY). */
  status: string;
}

const post = async (kind: Started["kind"], marker: string): Promise<Started> => {
  const body = {
    title: marker,
    initial_message: { role: "user", content: [{ type: "text", text: `${marker}: answer me` }] },
    ...(kind === "queued" ? { selected_repository: REPO } : {}),
  };
  const task = await client.json<{ id: string; status: string }>(
    client.call("/api/v1/app-conversations", { method: "POST", json: body }),
  );
  return { kind, marker, taskId: task.id, status: task.status };
};

/** The start READY, its run begun, then ended: exactly one answer, no error. */
const expectAnsweredOnce = async (s: Started) => {
  const conversationId = await client.waitForStart(s.taskId, 60_000);
  const detail = async () => {
    const runs = await stack.database.db
      .selectFrom("agent_runs")
      .selectAll()
      .where("conversation_id", "=", parseId(conversationId) ?? conversationId)
      .execute();
    const events = await client.events(conversationId);
    return `${s.kind} start ${s.marker} (task ${s.taskId}, conversation ${conversationId}): runs ${JSON.stringify(runs)}, events ${events.map((e) => e.kind).join(" > ")}`;
  };
  await waitFor(async () => (await client.conversation(conversationId)).execution_status !== "idle", {
    what: `the ${s.kind} run to begin`,
    timeoutMs: 60_000,
    detail,
  });
  const done = await waitFor(
    async () => {
      const c = await client.conversation(conversationId);
      return c.execution_status !== "running" && c;
    },
    { what: `the ${s.kind} run to end`, timeoutMs: 60_000, detail },
  );
  expect(done.execution_status, await detail()).toBe("finished");
  const events = await client.events<EventView & { llm_message?: { content: { text?: string }[] } }>(conversationId);
  const answers = events.filter((e) => e.kind === "MessageEvent" && e.source === "agent");
  expect(
    answers.map((a) => a.llm_message?.content[0]?.text),
    await detail(),
  ).toEqual([`answered ${s.marker}`]);
  expect(events.filter((e) => e.kind === "AgentErrorEvent")).toEqual([]);
};

beforeAll(async () => {
  stack = await startStack({ llm: true, git: true, api: true, workerEnv: WORKER_ENV, redisRole: "worker" });
  await stack.git.createFixtureRepo(REPO, { "README.md": "run durability\n" });
  const { key } = await stack.newUser({ name: "durability" });
  client = stack.client(key);
  flusher = createRedis(testRedisUrl(), "worker");
  // Each conversation's model call is answered after a moment, so runs wait in the queue and are
  // in flight while Redis loses its data; the answer names the conversation it answers.
  stack.llm.setResponder((request) => {
    const first = JSON.stringify(request.body.messages ?? []).match(/(dur-\d+-[a-z]+-\d+): answer me/);
    return { text: `answered ${first?.[1] ?? "?"}`, before: () => sleep(200 + at(600)) };
  });
  await Promise.all([startWorker("dur-a"), startWorker("dur-b")]);
  // Both pools full before the first round, so its warm starts can be claimed.
  await waitFor(
    async () =>
      (await stack.database.db.selectFrom("warm_sandboxes").select("id").where("claimed_at", "is", null).execute())
        .length >= 4,
    { what: "both workers' warm rows", timeoutMs: 90_000 },
  );
});

afterAll(async () => {
  flusher?.disconnect();
  await stack?.close();
});

describe("runs while Redis loses its data and workers are killed", () => {
  it(`${ROUNDS} rounds, ${ROUNDS * FLUSHES_PER_ROUND} losses of Redis' data: every run answers exactly once, none is stranded`, {
    timeout: scaled(300_000),
  }, async () => {
    const all: Started[] = [];
    const began = Date.now();
    for (let round = 0; round < ROUNDS; round++) {
      const kinds: Started["kind"][] = [
        ...Array<Started["kind"]>(WARM_PER_ROUND).fill("warm"),
        ...Array<Started["kind"]>(QUEUED_PER_ROUND).fill("queued"),
      ];
      const posting = kinds.map(async (kind, i) => {
        await sleep(at(POST_WITHIN_MS));
        return post(kind, `dur-${round}-${kind}-${i}`);
      });
      const losing = Array.from({ length: FLUSHES_PER_ROUND }, async () => {
        await sleep(at(CHAOS_WITHIN_MS));
        await loseRedisData();
      });
      const killing = (async () => {
        await sleep(at(CHAOS_WITHIN_MS));
        await killAndRestart(round % 2 === 0 ? "dur-a" : "dur-b");
      })();
      const started = await Promise.all(posting);
      await Promise.all([...losing, killing]);
      all.push(...started);
      // The round ends once each of its runs answered: the next round's kill finds no run of this one.
      await Promise.all(started.map(expectAnsweredOnce));
    }
    console.info(
      `run durability: ${all.length} starts (${all.filter((s) => s.status === "READY").length} READY in their answer), ${flushes} losses of Redis' data, ${ROUNDS} kills in ${Date.now() - began} ms`,
    );
    expect(flushes).toBe(ROUNDS * FLUSHES_PER_ROUND);
    // Both paths were taken: warm claims answered READY at once, starts with a repository went through the queue.
    expect(all.some((s) => s.kind === "warm" && s.status === "READY")).toBe(true);
    expect(all.filter((s) => s.kind === "queued").every((s) => s.status !== "READY")).toBe(true);
    // Nothing is left asked for and not ended.
    const open = await stack.database.db.selectFrom("agent_runs").selectAll().where("ended_at", "is", null).execute();
    expect(open).toEqual([]);
  });
});
