import { type Kysely, sql } from "kysely";

/**
 * Webhooks: a user's subscriptions, and the transactional outbox of their deliveries.
 * A delivery row is written in the same transaction as the state change it reports (start task
 * status, execution status, event append), so a process dying after the commit loses nothing:
 * workers sweep `pending` rows that are due and deliver them. Each try is kept as an attempt.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("webhooks")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("user_id", "uuid", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("url", "text", (c) => c.notNull())
    .addColumn("events", sql`text[]`, (c) => c.notNull())
    /** The signing secret (whsec_…), sealed with the secret box (context webhook:<id>). */
    .addColumn("secret_sealed", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    /** A deleted webhook stays for its deliveries' history; it gets no new ones. */
    .addColumn("deleted_at", "timestamptz")
    .execute();
  // The outbox writers look up a user's live webhooks in every state change's transaction.
  await sql`create index webhooks_user_live_idx on webhooks (user_id) where deleted_at is null`.execute(db);

  await db.schema
    .createTable("webhook_deliveries")
    .addColumn("id", "uuid", (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn("webhook_id", "uuid", (c) => c.notNull().references("webhooks.id").onDelete("cascade"))
    .addColumn("event_type", "text", (c) => c.notNull())
    /** The Standard Webhooks payload's `data`; its `timestamp` is created_at. */
    .addColumn("data", "jsonb", (c) => c.notNull())
    /** pending → delivered | failed (retries spent: WEBHOOK_RETRY_WINDOW_MS after created_at). */
    .addColumn("status", "text", (c) => c.notNull().defaultTo("pending"))
    .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("next_attempt_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    /** Held by the worker delivering it until then; a worker that died lets it lapse. */
    .addColumn("locked_until", "timestamptz")
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .addColumn("delivered_at", "timestamptz")
    .execute();
  // The sweep: due pending deliveries, oldest first.
  await sql`create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending'`.execute(
    db,
  );
  // GET /webhooks/{id}/deliveries, newest first.
  await sql`create index webhook_deliveries_webhook_idx on webhook_deliveries (webhook_id, created_at desc, id desc)`.execute(
    db,
  );

  await db.schema
    .createTable("webhook_delivery_attempts")
    .addColumn("delivery_id", "uuid", (c) => c.notNull().references("webhook_deliveries.id").onDelete("cascade"))
    .addColumn("attempt", "integer", (c) => c.notNull())
    .addColumn("started_at", "timestamptz", (c) => c.notNull())
    .addColumn("duration_ms", "integer", (c) => c.notNull())
    /** The receiver's HTTP status; null when none came (refused address, timeout, connection error). */
    .addColumn("status_code", "integer")
    .addColumn("error", "text")
    .addPrimaryKeyConstraint("webhook_delivery_attempts_pk", ["delivery_id", "attempt"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("webhook_delivery_attempts").ifExists().execute();
  await db.schema.dropTable("webhook_deliveries").ifExists().execute();
  await db.schema.dropTable("webhooks").ifExists().execute();
}
