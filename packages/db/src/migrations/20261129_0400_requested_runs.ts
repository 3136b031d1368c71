import { type Kysely, sql } from "kysely";
import { loadSqlCommands } from "../sql.ts";
import * as warmClaimFunction from "./20261128_0340_warm_claim_function.ts";

/**
 * A run lives in Postgres from the moment it is asked for until it ends: `agent_runs` gets a row
 * (status `queued`) in the transaction that asks for the run (a start's first message, a
 * follow-up, a `run` call), and its Redis job is only a copy that the janitor adds again when
 * Redis lost it. So the agent-run outbox, whose entries left Postgres once enqueued, goes; what it
 * held becomes queued runs. `tern_warm_claim` now lives in `sql/tern_warm_claim.sql` and writes
 * the first run's row.
 * - requested_at: when the run was asked for (the janitor's grace runs from it);
 * - engine_id: the engine whose queue the run goes to (the sandbox's, when it was asked for);
 * - started_at: null until a worker takes the run.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table agent_runs
      add column requested_at timestamptz not null default now(),
      add column engine_id text,
      alter column started_at drop not null,
      alter column started_at drop default`.execute(db);
  await sql`update agent_runs set requested_at = started_at`.execute(db);
  await sql`create index agent_runs_open_idx on agent_runs (requested_at) where ended_at is null`.execute(db);
  await sql`
    insert into agent_runs (id, conversation_id, status, requested_at, engine_id)
    select o.run_id, o.conversation_id, 'queued', o.created_at, o.engine_id
    from agent_run_outbox o join conversations c on c.id = o.conversation_id
    on conflict (id) do nothing`.execute(db);
  await sql`drop table agent_run_outbox`.execute(db);
  await loadSqlCommands(db, ["tern_warm_claim"]);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table agent_run_outbox (
      id bigserial primary key,
      conversation_id uuid not null,
      run_id uuid not null,
      engine_id text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    insert into agent_run_outbox (conversation_id, run_id, engine_id, created_at)
    select conversation_id, id, engine_id, requested_at from agent_runs where status = 'queued'`.execute(db);
  await sql`delete from agent_runs where status = 'queued'`.execute(db);
  await sql`drop index if exists agent_runs_open_idx`.execute(db);
  await sql`update agent_runs set started_at = coalesce(started_at, requested_at)`.execute(db);
  await sql`
    alter table agent_runs
      drop column requested_at,
      drop column engine_id,
      alter column started_at set default now(),
      alter column started_at set not null`.execute(db);
  // The function as the migration before this one wrote it.
  await warmClaimFunction.up(db);
}
