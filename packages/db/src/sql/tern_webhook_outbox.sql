-- tern_webhook_outbox(p_user, p_items): the one write of the webhook outbox. Each item
-- ({"type": …, "data": …}, in order) becomes a pending delivery for every live webhook of p_user
-- subscribed to its type, in the caller's transaction: the change a delivery tells of and the
-- delivery commit together, and the worker's relay (processors/webhooks.ts) sends it.
create or replace function tern_webhook_outbox(p_user uuid, p_items jsonb) returns void
language sql volatile as $$
  insert into webhook_deliveries (webhook_id, event_type, data)
  select w.id, i.v->>'type', i.v->'data'
  from jsonb_array_elements(p_items) with ordinality as i(v, ord)
  join webhooks w on w.user_id = p_user and w.deleted_at is null and (i.v->>'type') = any(w.events)
  order by i.ord, w.id
$$;
