import { type Kysely, sql } from "kysely";

/**
 * OpenHands V1's start fields kept on the conversation (trigger, pr_number, parent, public,
 * agent_type), the queue of pending messages sent to a start task before READY, and the index
 * of the events batch get (by id within a conversation).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("conversations")
    .addColumn("trigger", "text")
    .addColumn("pr_number", "jsonb", (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn("parent_conversation_id", "uuid")
    .addColumn("public", "boolean")
    .addColumn("agent_type", "text", (c) => c.notNull().defaultTo("default"))
    .execute();
  // sub_conversation_ids of a conversation.
  await sql`create index conversations_parent_idx on conversations (parent_conversation_id) where parent_conversation_id is not null`.execute(
    db,
  );
  // The search's other sort orders, keyset-paged.
  await sql`create index conversations_user_updated_idx on conversations (user_id, updated_at desc, id desc)`.execute(
    db,
  );
  await sql`create index start_tasks_user_updated_idx on start_tasks (user_id, updated_at desc, id desc)`.execute(db);
  // Whether a requested conversation_id is taken by a start in flight (resolveStartRequest).
  await sql`create index start_tasks_requested_conversation_idx on start_tasks ((request->>'conversation_id')) where (request->>'conversation_id') is not null`.execute(
    db,
  );

  await db.schema
    .createTable("pending_messages")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("start_task_id", "uuid", (c) => c.notNull().references("start_tasks.id").onDelete("cascade"))
    .addColumn("content", "jsonb", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await sql`create index pending_messages_task_idx on pending_messages (start_task_id, created_at, id)`.execute(db);

  await sql`create index events_conv_id_idx on events (conversation_id, id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists events_conv_id_idx`.execute(db);
  await db.schema.dropTable("pending_messages").execute();
  await sql`drop index if exists start_tasks_requested_conversation_idx`.execute(db);
  await sql`drop index if exists start_tasks_user_updated_idx`.execute(db);
  await sql`drop index if exists conversations_user_updated_idx`.execute(db);
  await sql`drop index if exists conversations_parent_idx`.execute(db);
  await db.schema
    .alterTable("conversations")
    .dropColumn("trigger")
    .dropColumn("pr_number")
    .dropColumn("parent_conversation_id")
    .dropColumn("public")
    .dropColumn("agent_type")
    .execute();
}
