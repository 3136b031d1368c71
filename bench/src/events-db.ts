import { randomUUID } from "node:crypto";
import { adminDatabaseUrl, ensureTemplateDatabase, withoutEventsIndexes } from "@tern/testing";
import pg from "pg";
import { copyEvents, EVENT_DATA_VERSION, eventLines, insertConversations } from "./event-data.ts";

export interface EventsDataset {
  /** Database name: the template's (migration hash), the size and the event data version, so reruns reuse it. */
  name: string;
  url: string;
  ownerId: string;
  /** The conversation holding `bigSize` events. */
  bigConversationId: string;
  bigSize: number;
  total: number;
  /** True when this run built it (the load time is then in `loadMs`). */
  built: boolean;
  loadMs: number | null;
}

export interface DatasetSize {
  label: string;
  bigSize: number;
  otherConversations: number;
  perOther: number;
}

export const FULL_DATASET: DatasetSize = {
  label: "10m",
  bigSize: 1_000_000,
  otherConversations: 900,
  perOther: 10_000,
};
export const QUICK_DATASET: DatasetSize = { label: "q60k", bigSize: 50_000, otherConversations: 10, perOther: 1_000 };

const urlOf = (name: string): string => {
  const u = new URL(adminDatabaseUrl());
  u.pathname = `/${name}`;
  return u.toString();
};

const withClient = async <T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> => {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
};

const describe = async (url: string, name: string, built: boolean, loadMs: number | null): Promise<EventsDataset> =>
  withClient(url, async (c) => {
    const meta = await c.query<{ owner: string; big: string; big_size: string; total: string }>(
      "select owner, big, big_size, total from bench_dataset",
    );
    const m = meta.rows[0];
    if (!m) throw new Error(`${name} has no bench_dataset row`);
    return {
      name,
      url,
      ownerId: m.owner,
      bigConversationId: m.big,
      bigSize: Number(m.big_size),
      total: Number(m.total),
      built,
      loadMs,
    };
  });

/**
 * The events search dataset, built once per migration set and size and kept between runs: it is
 * built under a temporary name and renamed when complete, so an interrupted load is never reused.
 * The events table's indexes and constraints are dropped for the load and recreated from their
 * own definitions afterwards (`withoutEventsIndexes`: the schema stays exactly what the migrations made).
 */
export const ensureEventsDataset = async (size: DatasetSize, progress: (m: string) => void): Promise<EventsDataset> => {
  const template = await ensureTemplateDatabase();
  const name = `tern_bench_ev_${template.slice(-12)}_${size.label}_v${EVENT_DATA_VERSION}`;
  const url = urlOf(name);
  const exists = await withClient(adminDatabaseUrl(), async (c) => {
    const r = await c.query("select 1 from pg_database where datname = $1", [name]);
    return (r.rowCount ?? 0) > 0;
  });
  if (exists) return describe(url, name, false, null);

  const building = `${name}_build`;
  const t0 = performance.now();
  await withClient(adminDatabaseUrl(), async (c) => {
    await c.query(`drop database if exists ${building}`);
    await c.query(`create database ${building} template ${template}`);
  });
  const total = size.bigSize + size.otherConversations * size.perOther;
  progress(`building events dataset ${name} (${total.toLocaleString()} events, built once and kept)`);
  await withClient(urlOf(building), async (c) => {
    await c.query("set maintenance_work_mem = '1GB'");
    await c.query("set synchronous_commit = off");
    const owner = randomUUID();
    await c.query("insert into users (id, is_admin) values ($1, false)", [owner]);
    const big = randomUUID();
    const others = Array.from({ length: size.otherConversations }, () => randomUUID());
    await insertConversations(c, owner, [big, ...others], (i) => (i === 0 ? size.bigSize : size.perOther));

    function* all(): Generator<string> {
      yield* eventLines(big, 1, size.bigSize);
      for (const id of others) yield* eventLines(id, 1, size.perOther);
    }
    const tCopy = performance.now();
    let copied = 0;
    await withoutEventsIndexes(c, async () => {
      await copyEvents(c, all());
      copied = performance.now();
      progress(`COPY of ${total.toLocaleString()} events: ${((copied - tCopy) / 1000).toFixed(1)} s`);
    });
    await c.query("vacuum analyze events");
    await c.query("analyze conversations");
    progress(`indexes and constraints rebuilt: ${((performance.now() - copied) / 1000).toFixed(1)} s`);

    await c.query("create table bench_dataset (owner uuid, big uuid, big_size bigint, total bigint)");
    await c.query("insert into bench_dataset values ($1, $2, $3, $4)", [owner, big, size.bigSize, total]);
  });
  await withClient(adminDatabaseUrl(), (c) => c.query(`alter database ${building} rename to ${name}`));
  return describe(url, name, true, performance.now() - t0);
};
