/**
 * Postgres commit latency (a one-row insert, synchronous_commit on) alone and while the engine
 * creates and removes containers beside it: how much of a warm claim's tail under refills is the
 * disk's.
 *
 *   node --import tsx bench/src/experiments/commit-under-create.mts [seconds]
 */
import { createTestDatabase } from "@tern/testing";
import pg from "pg";
import { createContext } from "../context.ts";
import { createAndStart, removeBenchContainers } from "../raw-docker.ts";
import { summarize } from "../stats.ts";

const seconds = Number(process.argv[2] ?? 10);
const ctx = createContext(false);
const database = await createTestDatabase();
const client = new pg.Client({ connectionString: database.url });
await client.connect();
await client.query("create table probe (id serial primary key, at timestamptz default now())");

const sample = async (ms: number, what: { commit: number[]; select: number[] }) => {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    let t = performance.now();
    await client.query("insert into probe default values");
    what.commit.push(performance.now() - t);
    t = performance.now();
    await client.query("select 1");
    what.select.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 20));
  }
};
const quiet = { commit: [] as number[], select: [] as number[] };
const busy = { commit: [] as number[], select: [] as number[] };
try {
  await sample(seconds * 1000, quiet);
  let stop = false;
  const churn = (async () => {
    for (let i = 0; !stop; i++) {
      const c = await createAndStart(ctx.floor, {
        image: ctx.image,
        name: `tern-bench-churn-${ctx.runId}-${i}`,
        runId: ctx.runId,
        network: "bridge",
      });
      await c.exec(["true"], { user: "agent" });
      void c.remove();
    }
  })();
  await sample(seconds * 1000, busy);
  stop = true;
  await churn;
  for (const [name, s] of Object.entries({ quiet, busy })) {
    for (const [k, v] of Object.entries(s)) {
      const x = summarize(v);
      console.log(
        `${name} ${k.padEnd(6)} n ${x.n} p50 ${x.p50.toFixed(2)} p95 ${x.p95.toFixed(2)} p99 ${x.p99.toFixed(2)} max ${x.max.toFixed(2)}`,
      );
    }
  }
} finally {
  await client.end();
  await database.drop();
  await removeBenchContainers(ctx.sandboxes, ctx.runId);
}
