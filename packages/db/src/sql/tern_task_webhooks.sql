-- tern_task_webhooks(p_task): the start_task.status delivery of a start task's status as its row
-- holds it now; called in the transaction that changed it. A sandbox's own start
-- (POST /api/v1/sandboxes) is no conversation's: no start-task webhook tells of it.
create or replace function tern_task_webhooks(p_task uuid) returns void
language sql volatile as $$
  select tern_webhook_outbox(t.user_id, jsonb_build_array(jsonb_build_object(
    'type', 'start_task.status',
    'data', jsonb_build_object(
      'id', replace(t.id::text, '-', ''),
      'status', t.status,
      'detail', t.detail,
      'app_conversation_id', replace(t.app_conversation_id::text, '-', ''),
      'sandbox_id', replace(t.sandbox_id::text, '-', ''),
      'created_at', tern_iso(t.created_at),
      'updated_at', tern_iso(t.updated_at)))))
  from start_tasks t
  where t.id = p_task and t.kind <> 'sandbox'
$$;
