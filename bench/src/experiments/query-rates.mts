/**
 * Experiment (not part of `pnpm bench`): how many of the batch GET's queries per second a pg.Pool
 * gets through with 32 in flight, unnamed and as named (prepared) statements.
 * Usage: node --import tsx bench/src/experiments/query-rates.mts
 */
import { randomUUID } from "node:crypto";
import { hashApiKey } from "@tern/core";
import { createTestDatabase } from "@tern/testing";
import pg from "pg";
import { createKey } from "../services.ts";

const db = await createTestDatabase();
const { key, userId } = await createKey(db.url);
const ids = Array.from({ length: 10 }, () => randomUUID());
for (const id of ids)
  await db.pool.query(
    `insert into conversations (id, user_id, title, workspace_dir) values ($1, $2, 'bench', '/workspace')`,
    [id, userId],
  );
const pool = new pg.Pool({ connectionString: db.url, max: 10 });
for (const [name, fn] of [
  [
    "auth",
    () =>
      pool.query(
        "select api_keys.*, users.is_admin from api_keys join users on users.id = api_keys.user_id where key_hash = $1 and revoked_at is null",
        [hashApiKey(key)],
      ),
  ],
  [
    "convs",
    () =>
      pool.query(
        "select c.*, s.status as sandbox_status from conversations c left join sandboxes s on s.id = c.sandbox_id where c.user_id = $1 and c.id = any($2::uuid[])",
        [userId, ids],
      ),
  ],
  [
    "convs-in",
    () =>
      pool.query(
        `select c.*, s.status as sandbox_status from conversations c left join sandboxes s on s.id = c.sandbox_id where c.user_id = $1 and c.id in (${ids.map((_, i) => `$${i + 2}`).join(",")})`,
        [userId, ...ids],
      ),
  ],
  [
    "auth-prep",
    () =>
      pool.query({
        name: "a",
        text: "select api_keys.*, users.is_admin from api_keys join users on users.id = api_keys.user_id where key_hash = $1 and revoked_at is null",
        values: [hashApiKey(key)],
      }),
  ],
  [
    "convs-prep",
    () =>
      pool.query({
        name: "c",
        text: "select c.*, s.status as sandbox_status from conversations c left join sandboxes s on s.id = c.sandbox_id where c.user_id = $1 and c.id = any($2::uuid[])",
        values: [userId, ids],
      }),
  ],
  ["select1", () => pool.query("select 1")],
] as const) {
  const N = 10000;
  let i = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (i++ < N) await fn();
    }),
  );
  console.log(name, "qps", (N / ((performance.now() - t) / 1000)).toFixed(0));
}
const r = await pool.query(
  `explain analyze select c.*, s.status as sandbox_status from conversations c left join sandboxes s on s.id = c.sandbox_id where c.user_id = $1 and c.id in (${ids.map((_, i) => `$${i + 2}`).join(",")})`,
  [userId, ...ids],
);
console.log(r.rows.map((x) => x["QUERY PLAN"]).join("\n"));
await pool.end();
await db.drop();
