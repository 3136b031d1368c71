import { type Kysely, sql } from "kysely";

/**
 * Change notifications for live streams. Postgres delivers a NOTIFY only when the
 * transaction that sent it commits, so a listener woken by one always finds the rows committed.
 * Sent by triggers, so every way of appending an event (the events repository's append, a bulk
 * seed) and every stage write of a start task is covered without each writer remembering to.
 *
 * - `tern_events`: payload = conversation id, once per statement and conversation (statement
 *   trigger over the transition table: an append of 50 events is one notification).
 * - `tern_start_tasks`: payload = `<task id>:<status>`, once per status a task enters, so a
 *   listener sees every stage even when two commit between its reads.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function tern_notify_events() returns trigger language plpgsql as $$
    begin
      perform pg_notify('tern_events', c.conversation_id::text)
      from (select distinct conversation_id from appended) c;
      return null;
    end $$
  `.execute(db);
  await sql`
    create trigger events_notify after insert on events
    referencing new table as appended
    for each statement execute function tern_notify_events()
  `.execute(db);
  await sql`
    create function tern_notify_start_tasks() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' or new.status is distinct from old.status then
        perform pg_notify('tern_start_tasks', new.id::text || ':' || new.status);
      end if;
      return null;
    end $$
  `.execute(db);
  await sql`
    create trigger start_tasks_notify after insert or update of status on start_tasks
    for each row execute function tern_notify_start_tasks()
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists start_tasks_notify on start_tasks`.execute(db);
  await sql`drop function if exists tern_notify_start_tasks()`.execute(db);
  await sql`drop trigger if exists events_notify on events`.execute(db);
  await sql`drop function if exists tern_notify_events()`.execute(db);
}
