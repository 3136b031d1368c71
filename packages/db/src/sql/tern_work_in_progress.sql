-- tern_work_in_progress(p_user, p_except): what counts against a user's MAX_STARTS_IN_FLIGHT_PER_USER,
-- the one definition every start and every agent-server run is checked with: the user's start
-- tasks not yet READY or ERROR, and the user's agent-server conversations with a run asked for and
-- not ended (one each: a conversation's runs go one at a time). An app conversation's own runs are
-- not counted: it holds a sandbox of its own, bounded by MAX_SANDBOXES_PER_USER; an agent-server
-- conversation holds none. `p_except`: a conversation whose run is being asked for (its own run
-- in progress is no second slot).
create or replace function tern_work_in_progress(p_user uuid, p_except uuid default null) returns int
language sql stable as $$
  select
    (select count(*) from start_tasks t
      where t.user_id = p_user and t.status not in ('READY', 'ERROR'))::int
    + (select count(distinct r.conversation_id) from agent_runs r
        join agent_server_conversations a on a.conversation_id = r.conversation_id
        join conversations c on c.id = r.conversation_id
      where c.user_id = p_user and r.ended_at is null
        and (p_except is null or r.conversation_id <> p_except))::int
$$;
