-- tern_warm_claim(p jsonb): the API's warm claim in one round trip, in the caller's statement (so
-- one transaction). Loaded by the migrations that name it (db/src/sql.ts); a change here comes
-- with a migration that loads it again.
-- - the quotas: the user's row locked (FOR NO KEY UPDATE, as usersRepository.lockForQuota), then
--   its starts in flight and live sandboxes counted. Each statement of a plpgsql function takes its
--   own snapshot under READ COMMITTED, so the counts see a racing start that committed while this
--   one waited for the lock. Past a quota: {"outcome":"quota",...} and nothing written;
-- - a healthy, fresh, unclaimed row of the spec (FOR UPDATE SKIP LOCKED). None: {"outcome":"miss"}
--   and nothing written (the caller goes to the queue);
-- - the start task (WORKING, then READY with its stage history and durations), its sandbox row,
--   the conversation (its model: the request's, else the user's setting, else the row's), its
--   first events (the system prompt from the row, the initial message as given), its first run
--   (queued), and the webhook outbox of the task's two statuses and of the events.
-- Returns {"outcome":"hit","task":<start_tasks row, timestamps as the API formats them>,"run_id":…}.
-- What needs the application's keys (the session key's hash and sealed value), the masked message
-- and the ids come in p.
create or replace function tern_warm_claim(p jsonb) returns jsonb
language plpgsql as $fn$
declare
  v_user uuid := (p->>'user_id')::uuid;
  v_task uuid := (p->>'task_id')::uuid;
  v_conv uuid := (p->>'conversation_id')::uuid;
  v_max_in_flight int := coalesce((p->>'max_in_flight')::int, 0);
  v_max_sandboxes int := coalesce((p->>'max_sandboxes')::int, 0);
  v_in_flight int := 0;
  v_live int := 0;
  v_hist jsonb;
  v_created timestamptz;
  v_after_claim timestamptz;
  v_model text;
  v_last timestamptz;
  v_n int;
  v_events jsonb;
  v_run uuid;
  v_hooked boolean;
  w warm_sandboxes%rowtype;
  r start_tasks%rowtype;
begin
  if v_max_in_flight > 0 or v_max_sandboxes > 0 then
    perform 1 from users u where u.id = v_user for no key update;
    select count(*) into v_in_flight from start_tasks t
      where t.user_id = v_user and t.status not in ('READY', 'ERROR');
    select v_in_flight + count(*) into v_live from sandboxes s join start_tasks t on t.id = s.start_task_id
      where s.status in ('STARTING', 'RUNNING', 'PAUSED') and t.user_id = v_user and t.status in ('READY', 'ERROR');
    if (v_max_in_flight > 0 and v_in_flight >= v_max_in_flight)
       or (v_max_sandboxes > 0 and v_live >= v_max_sandboxes) then
      return jsonb_build_object('outcome', 'quota', 'in_flight', v_in_flight, 'live', v_live);
    end if;
  end if;

  v_created := now();
  v_hist := jsonb_build_array(
    jsonb_build_object('status', 'WORKING', 'at', tern_iso(v_created)),
    jsonb_build_object('status', 'WAITING_FOR_SANDBOX', 'at', tern_iso(clock_timestamp())));
  update warm_sandboxes ws set claimed_at = now(), conversation_id = v_conv
  where ws.id = (
    select c.id from warm_sandboxes c
    where c.spec = p->>'spec' and c.claimed_at is null and c.healthy
      and c.checked_at > now() - make_interval(secs => (p->>'fresh_secs')::double precision)
    order by c.created_at
    limit 1
    for update skip locked)
  returning ws.* into w;
  if not found then
    return jsonb_build_object('outcome', 'miss');
  end if;
  v_after_claim := clock_timestamp();
  v_hist := v_hist || (
    select jsonb_agg(jsonb_build_object('status', s, 'at', tern_iso(v_after_claim)) order by o)
    from unnest(array['PREPARING_REPOSITORY', 'RUNNING_SETUP_SCRIPT', 'SETTING_UP_GIT_HOOKS',
                      'SETTING_UP_SKILLS', 'STARTING_CONVERSATION']) with ordinality as x(s, o));

  v_hooked := exists (select 1 from webhooks wh where wh.user_id = v_user and wh.deleted_at is null);

  insert into start_tasks (id, user_id, status, request, created_at, updated_at)
  values (v_task, v_user, 'WORKING', p->'request', v_created, v_created)
  returning * into r;
  if v_hooked then
    insert into webhook_deliveries (webhook_id, event_type, data)
    select wh.id, 'start_task.status', jsonb_build_object(
      'id', replace(r.id::text, '-', ''), 'status', r.status, 'detail', r.detail,
      'app_conversation_id', null, 'sandbox_id', null,
      'created_at', tern_iso(r.created_at), 'updated_at', tern_iso(r.updated_at))
    from webhooks wh
    where wh.user_id = v_user and wh.deleted_at is null and 'start_task.status' = any(wh.events);
  end if;

  insert into sandboxes (id, name, image, user_id, start_task_id, status, engine_id, ref, conversation_id)
  values (w.id, w.name, w.image, v_user, v_task, 'RUNNING', w.engine_id, w.ref, v_conv);

  v_model := coalesce(p->>'llm_model',
                      (select us.llm_model from user_settings us where us.user_id = v_user),
                      w.llm_model);
  v_events := jsonb_build_array(jsonb_build_object(
    'id', p->>'system_event_id', 'kind', 'SystemPromptEvent', 'source', 'agent',
    'payload', jsonb_build_object(
      'system_prompt', jsonb_build_object('type', 'text', 'text',
        array_to_string(array[w.system_prompt->>'text'] ||
          array(select jsonb_array_elements_text(coalesce(p->'prompt_suffixes', '[]'::jsonb))), E'\n\n')),
      'tools', coalesce(w.system_prompt->'tools', '[]'::jsonb))));
  if p->'user_message' is not null and jsonb_typeof(p->'user_message') = 'object' then
    v_events := v_events || jsonb_build_array(jsonb_build_object(
      'id', p->>'user_event_id', 'kind', 'MessageEvent', 'source', 'user', 'payload', p->'user_message'));
  end if;
  v_n := jsonb_array_length(v_events);
  v_last := clock_timestamp() + (v_n - 1) * interval '1 microsecond';

  insert into conversations (id, user_id, start_task_id, title, sandbox_id, session_api_key_hash,
    session_api_key_sealed, selected_repository, selected_branch, git_provider, llm_model, skills, hooks,
    workspace_dir, trigger, pr_number, parent_conversation_id, public, agent_type, last_seq, last_event_at)
  values (v_conv, v_user, v_task, p->>'title', w.id, p->>'session_key_hash', p->>'session_key_sealed',
    null, p->>'selected_branch', p->>'git_provider', v_model, '[]'::jsonb, '[]'::jsonb,
    w.workspace_dir, p->>'trigger', coalesce(p->'pr_number', '[]'::jsonb),
    (p->>'parent_conversation_id')::uuid, (p->>'public')::boolean, coalesce(p->>'agent_type', 'default'),
    v_n, v_last);

  insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
  select v_conv, e.ord, (e.v->>'id')::uuid, e.v->>'kind', e.v->>'source',
         v_last - (v_n - e.ord) * interval '1 microsecond', e.v->'payload'
  from jsonb_array_elements(v_events) with ordinality as e(v, ord)
  order by e.ord;
  if v_hooked then
    insert into webhook_deliveries (webhook_id, event_type, data)
    select wh.id, 'conversation.event', jsonb_build_object(
      'conversation_id', replace(v_conv::text, '-', ''),
      'event', ev.payload || jsonb_build_object('id', ev.id, 'kind', ev.kind, 'source', ev.source,
                                                'timestamp', tern_iso(ev."timestamp")))
    from events ev
    join webhooks wh on wh.user_id = v_user and wh.deleted_at is null
    where ev.conversation_id = v_conv and 'conversation.event' = any(wh.events)
    order by ev.seq;
  end if;

  -- The first run, asked for by the initial message: a row from this commit on, whatever Redis
  -- keeps (its job is a copy the caller adds after the commit, and the janitor adds again when lost).
  if v_n > 1 then
    insert into agent_runs (id, conversation_id, status, engine_id)
    values (v_conv, v_conv, 'queued', w.engine_id)
    on conflict (id) do nothing;
    v_run := v_conv;
  end if;

  v_hist := v_hist || jsonb_build_array(jsonb_build_object('status', 'READY', 'at', tern_iso(clock_timestamp())));
  update start_tasks t set
    status = 'READY', app_conversation_id = v_conv, sandbox_id = w.id, stage_history = v_hist,
    stage_durations = (
      select coalesce(jsonb_object_agg(h.v->>'status',
               floor(extract(epoch from (n.v->>'at')::timestamptz) * 1000)
               - floor(extract(epoch from (h.v->>'at')::timestamptz) * 1000)), '{}'::jsonb)
      from jsonb_array_elements(v_hist) with ordinality as h(v, o)
      join jsonb_array_elements(v_hist) with ordinality as n(v, o) on n.o = h.o + 1
      where h.v->>'status' <> 'WORKING'),
    updated_at = clock_timestamp()
  where t.id = v_task
  returning * into r;
  if v_hooked then
    insert into webhook_deliveries (webhook_id, event_type, data)
    select wh.id, 'start_task.status', jsonb_build_object(
      'id', replace(r.id::text, '-', ''), 'status', r.status, 'detail', r.detail,
      'app_conversation_id', replace(r.app_conversation_id::text, '-', ''),
      'sandbox_id', replace(r.sandbox_id::text, '-', ''),
      'created_at', tern_iso(r.created_at), 'updated_at', tern_iso(r.updated_at))
    from webhooks wh
    where wh.user_id = v_user and wh.deleted_at is null and 'start_task.status' = any(wh.events);
  end if;

  return jsonb_build_object(
    'outcome', 'hit',
    'run_id', v_run,
    'engine_id', w.engine_id,
    'task', to_jsonb(r) || jsonb_build_object('created_at', tern_iso(r.created_at),
                                              'updated_at', tern_iso(r.updated_at)));
end
$fn$;
