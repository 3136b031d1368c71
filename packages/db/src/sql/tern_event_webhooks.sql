-- tern_event_webhooks(p_conversation, p_user, p_events): the webhook deliveries of events appended
-- to a conversation (p_events: each {id, kind, source, timestamp (tern_iso), payload}, in order):
-- conversation.event for each, with the event as the API shows it, and
-- conversation.execution_status for each execution status change. Every event writer calls it in
-- the statement or transaction of its append: the append (events.ts), a run's steps
-- (step-writer.ts) and the opening of a conversation (tern_open_conversation).
create or replace function tern_event_webhooks(p_conversation uuid, p_user uuid, p_events jsonb) returns void
language sql volatile as $$
  select tern_webhook_outbox(p_user, coalesce(jsonb_agg(x.item order by e.ord, x.n), '[]'::jsonb))
  from jsonb_array_elements(p_events) with ordinality as e(v, ord)
  cross join lateral (values
    (1, jsonb_build_object('type', 'conversation.event', 'data', jsonb_build_object(
      'conversation_id', replace(p_conversation::text, '-', ''),
      'event', (e.v->'payload') || jsonb_build_object(
        'id', e.v->'id', 'kind', e.v->'kind', 'source', e.v->'source', 'timestamp', e.v->'timestamp')))),
    (2, case when e.v->>'kind' = 'ConversationStateUpdateEvent' and e.v->'payload'->>'key' = 'execution_status'
      then jsonb_build_object('type', 'conversation.execution_status', 'data', jsonb_build_object(
        'conversation_id', replace(p_conversation::text, '-', ''),
        'execution_status', e.v->'payload'->'value',
        'event_id', e.v->'id',
        'timestamp', e.v->'timestamp'))
      end)
  ) as x(n, item)
  where x.item is not null
$$;
