-- tern_bash_purge: a sandbox's agent-server bash events leave with it. Once its status becomes
-- MISSING or ERROR (removed, lost with its engine, or never made), its commands and their outputs
-- are deleted in the same statement as the status change, whichever path made it: the removal
-- job, the janitor, an idle pause found gone, an engine given up on. The sandbox's row stays, as
-- every sandbox's does; nothing of its bash history is kept without it.
create or replace function tern_bash_purge() returns trigger
language plpgsql as $$
begin
  delete from bash_events where sandbox_id = new.id;
  return null;
end
$$;

drop trigger if exists sandboxes_bash_purge on sandboxes;
create trigger sandboxes_bash_purge
  after update of status on sandboxes
  for each row
  when (new.status in ('MISSING', 'ERROR') and old.status is distinct from new.status)
  execute function tern_bash_purge();
