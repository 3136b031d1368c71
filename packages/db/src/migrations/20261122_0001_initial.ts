import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("users")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("is_admin", "boolean", (c) => c.notNull().defaultTo(false))
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable("api_keys")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("user_id", "uuid", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("name", "text")
    .addColumn("prefix", "text", (c) => c.notNull())
    .addColumn("key_hash", "text", (c) => c.notNull().unique())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("expires_at", "timestamptz")
    .addColumn("revoked_at", "timestamptz")
    .addColumn("last_used_at", "timestamptz")
    .execute();
  await db.schema.createIndex("api_keys_user_idx").on("api_keys").columns(["user_id", "created_at"]).execute();

  await db.schema
    .createTable("start_tasks")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("user_id", "uuid", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("detail", "text")
    .addColumn("app_conversation_id", "uuid")
    .addColumn("sandbox_id", "uuid")
    .addColumn("agent_server_url", "text")
    .addColumn("request", "jsonb", (c) => c.notNull())
    .addColumn("attempt", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("stage_durations", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // Listing a user's tasks newest first, keyset-paged.
  await sql`create index start_tasks_user_created_idx on start_tasks (user_id, created_at desc, id desc)`.execute(db);
  // The reconciler and deadline sweep only look at tasks still in flight.
  await sql`create index start_tasks_inflight_idx on start_tasks (updated_at) where status not in ('READY', 'ERROR')`.execute(
    db,
  );

  await db.schema
    .createTable("conversations")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("user_id", "uuid", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("start_task_id", "uuid", (c) => c.unique().references("start_tasks.id").onDelete("set null"))
    .addColumn("title", "text")
    .addColumn("sandbox_id", "uuid")
    .addColumn("execution_status", "text", (c) => c.notNull().defaultTo("idle"))
    .addColumn("session_api_key", "text", (c) => c.notNull().unique())
    .addColumn("selected_repository", "text")
    .addColumn("selected_branch", "text")
    .addColumn("git_provider", "text")
    .addColumn("llm_model", "text")
    .addColumn("metrics", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn("skills", "jsonb", (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn("workspace_dir", "text", (c) => c.notNull())
    .addColumn("last_seq", "bigint", (c) => c.notNull().defaultTo(0))
    .addColumn("last_event_at", "timestamptz")
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index conversations_user_created_idx on conversations (user_id, created_at desc, id desc)`.execute(
    db,
  );

  await db.schema
    .createTable("sandboxes")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("start_task_id", "uuid")
    .addColumn("conversation_id", "uuid")
    .addColumn("container_name", "text", (c) => c.notNull().unique())
    .addColumn("container_id", "text")
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("image", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex("sandboxes_task_idx").on("sandboxes").column("start_task_id").execute();
  await db.schema.createIndex("sandboxes_conversation_idx").on("sandboxes").column("conversation_id").execute();

  // One row per event; (conversation_id, seq) is the natural key and the append order.
  await db.schema
    .createTable("events")
    .addColumn("conversation_id", "uuid", (c) => c.notNull().references("conversations.id").onDelete("cascade"))
    .addColumn("seq", "bigint", (c) => c.notNull())
    .addColumn("id", "uuid", (c) => c.notNull())
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("source", "text", (c) => c.notNull())
    .addColumn("timestamp", "timestamptz", (c) => c.notNull())
    .addColumn("payload", "jsonb", (c) => c.notNull())
    .addPrimaryKeyConstraint("events_pkey", ["conversation_id", "seq"])
    .execute();
  // The two indexes of the events search (DESIGN, Events): with and without a kind filter.
  await sql`create index events_conv_ts_idx on events (conversation_id, "timestamp", seq)`.execute(db);
  await sql`create index events_conv_kind_ts_idx on events (conversation_id, kind, "timestamp", seq)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ["events", "sandboxes", "conversations", "start_tasks", "api_keys", "users"]) {
    await db.schema.dropTable(t).ifExists().cascade().execute();
  }
}
