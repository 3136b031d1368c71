-- tern_open_conversation(p jsonb): the one definition of opening a conversation, for the API's warm
-- claim (tern_warm_claim) and the worker's start pipeline (services' openConversation) alike: the
-- conversation's row, its sandbox's link to it, its first events and their webhook deliveries.
-- Idempotent per start task: a second call (a retried attempt) finds the conversation an earlier
-- one made, moves it to this attempt's sandbox, and adds no event to a conversation that has some.
-- p: conversation_id, task_id, user_id, title, sandbox_id, session_key_hash, session_key_sealed,
--   selected_repository, selected_branch, git_provider, llm_model (resolved by the caller), skills,
--   hooks, workspace_dir, trigger, pr_number, parent_conversation_id, public, agent_type;
--   the first events, when system_prompt is given: system_prompt {text, tools} with prompt_suffixes (paragraphs appended: plan
--   mode, system_message_suffix) as system_event_id, and user_message (the initial message's
--   MessageEvent payload, masked by the caller; null: none) as user_event_id.
-- Returns {"conversation_id": …, "appended": <events written>}.
create or replace function tern_open_conversation(p jsonb) returns jsonb
language plpgsql as $fn$
declare
  v_user uuid := (p->>'user_id')::uuid;
  v_task uuid := (p->>'task_id')::uuid;
  v_sandbox uuid := (p->>'sandbox_id')::uuid;
  v_conv uuid;
  v_events jsonb;
  v_n int;
  v_last timestamptz;
begin
  insert into conversations (id, user_id, start_task_id, title, sandbox_id, session_api_key_hash,
    session_api_key_sealed, selected_repository, selected_branch, git_provider, llm_model, skills, hooks,
    workspace_dir, trigger, pr_number, parent_conversation_id, public, agent_type)
  values ((p->>'conversation_id')::uuid, v_user, v_task, p->>'title', v_sandbox, p->>'session_key_hash',
    p->>'session_key_sealed', p->>'selected_repository', p->>'selected_branch', p->>'git_provider',
    p->>'llm_model', coalesce(p->'skills', '[]'::jsonb), coalesce(p->'hooks', '[]'::jsonb),
    p->>'workspace_dir', p->>'trigger', coalesce(p->'pr_number', '[]'::jsonb),
    (p->>'parent_conversation_id')::uuid, (p->>'public')::boolean, coalesce(p->>'agent_type', 'default'))
  on conflict (start_task_id) do nothing;
  select c.id into v_conv from conversations c where c.start_task_id = v_task;

  -- A start that began over in a fresh sandbox finds the conversation an earlier attempt made with the old one.
  if v_sandbox is not null then
    update conversations c set sandbox_id = v_sandbox, updated_at = clock_timestamp()
    where c.id = v_conv and c.sandbox_id is distinct from v_sandbox;
    update sandboxes s set conversation_id = v_conv
    where s.id = v_sandbox and s.conversation_id is distinct from v_conv;
  end if;
  if jsonb_typeof(p->'system_prompt') is distinct from 'object' then
    return jsonb_build_object('conversation_id', v_conv, 'appended', 0);
  end if;

  v_events := jsonb_build_array(jsonb_build_object(
    'id', p->>'system_event_id', 'kind', 'SystemPromptEvent', 'source', 'agent',
    'payload', jsonb_build_object(
      'system_prompt', jsonb_build_object('type', 'text', 'text',
        array_to_string(array[p->'system_prompt'->>'text'] ||
          array(select jsonb_array_elements_text(coalesce(p->'prompt_suffixes', '[]'::jsonb))), E'\n\n')),
      'tools', coalesce(p->'system_prompt'->'tools', '[]'::jsonb))));
  if jsonb_typeof(p->'user_message') = 'object' then
    v_events := v_events || jsonb_build_array(jsonb_build_object(
      'id', p->>'user_event_id', 'kind', 'MessageEvent', 'source', 'user', 'payload', p->'user_message'));
  end if;
  v_n := jsonb_array_length(v_events);

  -- The first events go only into a conversation that has none (as the append's onlyIfEmpty):
  -- the conversation row is the counter, its lock orders appenders.
  update conversations c
  set last_seq = v_n,
      last_event_at = greatest(clock_timestamp(), coalesce(c.last_event_at, '-infinity'::timestamptz) + interval '1 microsecond')
                      + (v_n - 1) * interval '1 microsecond'
  where c.id = v_conv and c.last_seq = 0
  returning c.last_event_at into v_last;
  if not found then
    return jsonb_build_object('conversation_id', v_conv, 'appended', 0);
  end if;
  insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
  select v_conv, e.ord, (e.v->>'id')::uuid, e.v->>'kind', e.v->>'source',
         v_last - (v_n - e.ord) * interval '1 microsecond', e.v->'payload'
  from jsonb_array_elements(v_events) with ordinality as e(v, ord)
  order by e.ord;
  perform tern_event_webhooks(v_conv, v_user, (
    select jsonb_agg(jsonb_build_object('id', ev.id, 'kind', ev.kind, 'source', ev.source,
                                        'timestamp', tern_iso(ev."timestamp"), 'payload', ev.payload) order by ev.seq)
    from events ev where ev.conversation_id = v_conv));
  return jsonb_build_object('conversation_id', v_conv, 'appended', v_n);
end
$fn$;
