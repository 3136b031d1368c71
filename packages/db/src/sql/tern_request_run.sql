-- tern_request_run(p_conversation, p_run, p_engine): a run of the agent asked for, in the caller's
-- transaction (the one that writes what asks for it): a queued agent_runs row, owed from its commit
-- on whatever Redis keeps. Its job is a copy added after the commit, and again by the janitor when
-- lost. A run asked for twice under the same id (a start's first run is its conversation's id) is
-- one row.
create or replace function tern_request_run(p_conversation uuid, p_run uuid, p_engine text) returns void
language sql volatile as $$
  insert into agent_runs (id, conversation_id, status, engine_id)
  values (p_run, p_conversation, 'queued', p_engine)
  on conflict (id) do nothing
$$;
