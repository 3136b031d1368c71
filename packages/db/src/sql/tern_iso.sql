-- tern_iso(ts): a timestamp as the API writes it (ISO 8601 UTC, microseconds, "Z"), as
-- pgTimestampToIso (connection.ts) reads it: what the webhook payloads built in SQL carry.
create or replace function tern_iso(ts timestamptz) returns text
language sql immutable as $$
  select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
