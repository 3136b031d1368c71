import { type Kysely, sql } from "kysely";

/**
 * The warm pool as rows, so the API can claim a warm sandbox in the start's own
 * transaction (a row is not an engine: the API still never talks to one).
 * - warm_sandboxes: one row per warm container a worker's pool made; its owner keeps the row and
 *   its health (checked_at), and what a start without a repository needs that only a worker knows
 *   (the empty workspace, the system prompt for it, the deployment's model). A claim marks the row (claimed_at, the conversation) in the
 *   transaction that writes the start; the agent run's first look at the sandbox deletes it.
 * - agent_run_outbox: the agent run a claim asked for, committed with it; a relay enqueues it.
 * - start_tasks.stage_history: each stage the task entered, with its time.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table warm_sandboxes (
      id uuid primary key,
      name text not null unique,
      ref text not null,
      engine_id text,
      image text not null,
      spec text not null,
      owner_worker text not null,
      healthy boolean not null default true,
      workspace_dir text not null,
      system_prompt jsonb not null,
      llm_model text,
      created_at timestamptz not null default now(),
      checked_at timestamptz not null default now(),
      claimed_at timestamptz,
      conversation_id uuid
    )`.execute(db);
  await sql`create index warm_sandboxes_claimable_idx on warm_sandboxes (spec, created_at) where claimed_at is null and healthy`.execute(
    db,
  );
  await sql`create index warm_sandboxes_owner_idx on warm_sandboxes (owner_worker)`.execute(db);
  await sql`
    create table agent_run_outbox (
      id bigserial primary key,
      conversation_id uuid not null,
      run_id uuid not null,
      engine_id text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`alter table start_tasks add column stage_history jsonb not null default '[]'::jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table start_tasks drop column if exists stage_history`.execute(db);
  await sql`drop table if exists agent_run_outbox`.execute(db);
  await sql`drop table if exists warm_sandboxes`.execute(db);
}
