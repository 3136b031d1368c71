-- tern_warm_claim(p jsonb): the API's warm claim in one round trip, in the caller's statement (so
-- one transaction: the caller's, when it has one open, as a start with secrets does to seal them).
-- - the quotas: the user's row locked (FOR NO KEY UPDATE, as usersRepository.lockForQuota), then
--   its work in progress (tern_work_in_progress: starts in flight and agent-server runs) and live
--   sandboxes counted. Each statement of a plpgsql function takes its
--   own snapshot under READ COMMITTED, so the counts see a racing start that committed while this
--   one waited for the lock. Past a quota: {"outcome":"quota",...} and nothing written;
-- - a healthy, fresh, unclaimed row of the spec (FOR UPDATE SKIP LOCKED). None: {"outcome":"miss"}
--   and nothing written (the caller goes to the queue);
-- - the start task (WORKING, then READY with its stage history and durations) and the webhook
--   deliveries of both statuses (tern_task_webhooks), its sandbox row, the conversation opened as
--   the worker's pipeline opens one (tern_open_conversation; its model: the request's, else the
--   user's setting, else the row's; its system prompt: the row's), and its first run (queued).
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
  v_starts int := 0;
  v_live int := 0;
  v_hist jsonb;
  v_created timestamptz;
  v_after_claim timestamptz;
  v_run uuid;
  w warm_sandboxes%rowtype;
  r start_tasks%rowtype;
begin
  if v_max_in_flight > 0 or v_max_sandboxes > 0 then
    perform 1 from users u where u.id = v_user for no key update;
    v_in_flight := tern_work_in_progress(v_user);
    select count(*) into v_starts from start_tasks t
      where t.user_id = v_user and t.status not in ('READY', 'ERROR');
    select v_starts + count(*) into v_live from sandboxes s join start_tasks t on t.id = s.start_task_id
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

  insert into start_tasks (id, user_id, status, request, created_at, updated_at)
  values (v_task, v_user, 'WORKING', p->'request', v_created, v_created);
  perform tern_task_webhooks(v_task);

  insert into sandboxes (id, name, image, user_id, start_task_id, status, engine_id, ref, conversation_id)
  values (w.id, w.name, w.image, v_user, v_task, 'RUNNING', w.engine_id, w.ref, v_conv);

  perform tern_open_conversation(p || jsonb_build_object(
    'sandbox_id', w.id,
    'llm_model', coalesce(p->>'llm_model',
                          (select us.llm_model from user_settings us where us.user_id = v_user),
                          w.llm_model),
    'selected_repository', null,
    'skills', '[]'::jsonb,
    'hooks', '[]'::jsonb,
    'workspace_dir', w.workspace_dir,
    'system_prompt', w.system_prompt));

  -- The first run, asked for by the initial message: a row from this commit on, whatever Redis
  -- keeps (its job is a copy the caller adds after the commit, and the janitor adds again when lost).
  if jsonb_typeof(p->'user_message') = 'object' then
    v_run := v_conv;
    perform tern_request_run(v_conv, v_run, w.engine_id);
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
  perform tern_task_webhooks(v_task);

  return jsonb_build_object(
    'outcome', 'hit',
    'run_id', v_run,
    'engine_id', w.engine_id,
    'task', to_jsonb(r) || jsonb_build_object('created_at', tern_iso(r.created_at),
                                              'updated_at', tern_iso(r.updated_at)));
end
$fn$;
