/** The server of minimal-get.mts: Hono + pg, the API's two queries, nothing else. */
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import pg from "pg";

const url = process.env.DBURL!;
const pool = new pg.Pool({ connectionString: url, max: Number(process.env.MAX ?? 10) });
const app = new Hono();

import { hashApiKey } from "@tern/core";

app.get("/api/v1/app-conversations", async (c) => {
  if (process.env.ONE) {
    const ids = c.req.queries("ids") ?? [];
    const r = await pool.query(
      "with k as (select api_keys.user_id from api_keys join users on users.id = api_keys.user_id where key_hash = $1 and revoked_at is null) select c.*, s.status as sandbox_status from k join conversations c on c.user_id = k.user_id left join sandboxes s on s.id = c.sandbox_id where c.id = any($2::uuid[])",
      [hashApiKey((c.req.header("authorization") ?? "").slice(7)), ids],
    );
    return c.json(r.rows);
  }
  const k = await pool.query(
    "select api_keys.*, users.is_admin from api_keys join users on users.id = api_keys.user_id where key_hash = $1 and revoked_at is null",
    [hashApiKey((c.req.header("authorization") ?? "").slice(7))],
  );
  const ids = c.req.queries("ids") ?? [];
  const r = await pool.query(
    "select c.*, s.status as sandbox_status from conversations c left join sandboxes s on s.id = c.sandbox_id where c.user_id = $1 and c.id = any($2::uuid[])",
    [k.rows[0].user_id, ids],
  );
  return c.json(r.rows);
});
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: "127.0.0.1" });
