import { type Kysely, sql } from "kysely";

/**
 * Repository snapshots: a sandbox committed as an image after its setup script
 * succeeded, so the next start of the same user, repository, branch, commit, setup script and
 * sandbox image begins from it. Per user (removed with the user: the janitor removes an image
 * whose row is gone) and per engine (an image lives on the engine that made it).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table repo_snapshots (
      id uuid primary key,
      user_id uuid not null references users(id) on delete cascade,
      engine_id text not null,
      provider text not null,
      repository text not null,
      branch text not null,
      commit text not null,
      setup_hash text not null,
      has_pre_commit boolean not null default false,
      has_skills boolean not null default false,
      base_image text not null,
      image text not null,
      bytes bigint not null,
      created_at timestamptz not null default now(),
      last_used_at timestamptz not null default now(),
      unique (user_id, engine_id, provider, repository, branch, commit, setup_hash, base_image)
    )`.execute(db);
  await sql`create index repo_snapshots_engine_used on repo_snapshots (engine_id, last_used_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists repo_snapshots`.execute(db);
}
