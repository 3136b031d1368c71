#!/usr/bin/env bash
# Runs the service: API and one worker in the foreground, local services started where none
# are configured. Either process ending stops the other, and the script exits non-zero saying
# which one ended and how; Ctrl-C (or SIGTERM) stops both cleanly.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[tern] %s\n' "$*" >&2; }

bash scripts/lib/ensure-pnpm.sh
# A Docker engine started here keeps Docker's own default storage (overlay2 on the host's
# filesystem, the fastest to create containers on); the worker holds sandboxes to SANDBOX_DISK_MB
# there by watching them. TERN_DOCKER_XFS=1 opts into a data root with quotas instead (hard
# limits, slower container creation: see the README). An engine already running is left as it is.
# TERN_DOCKER_USERNS=1 runs the sandboxes on an engine of their own with userns-remap
# (scripts/lib/ensure-engine.sh, engine TERN_DOCKER_USERNS_ENGINE), where a sandbox's root is an
# unprivileged host uid and the worker gives its user sudo: see the README, "Root in sandboxes".
if [ "${TERN_DOCKER_USERNS:-}" = 1 ]; then
  [ -z "${DOCKER_HOST:-}" ] || { log "TERN_DOCKER_USERNS=1 starts an engine of its own: unset DOCKER_HOST"; exit 1; }
  DOCKER_HOST="$(bash scripts/lib/ensure-engine.sh "${TERN_DOCKER_USERNS_ENGINE:-40}")"
  export DOCKER_HOST
fi
bash scripts/lib/ensure-all.sh
# Compiled JavaScript only at run time (no TypeScript loader): packages resolve to their dist/
# under the tern-dist condition.
pnpm --silent build >/dev/null
node_flags=(--conditions=tern-dist --enable-source-maps)
# Migrations run once, here, under Postgres's advisory lock; the api and the worker only check
# the schema and refuse to start when it is behind.
node "${node_flags[@]}" packages/db/dist/cli.js >/dev/null

port="${PORT:-3000}"
url="${PUBLIC_URL:-http://localhost:$port}"
first_key="$(node "${node_flags[@]}" apps/cli/dist/main.js keys create --name first-admin --admin --if-none)"

# A stop asked for (Ctrl-C, SIGTERM) is only noted here; the supervision below acts on it.
requested=""
trap 'requested=INT' INT
trap 'requested=TERM' TERM

# Each `node … &` is node itself (no function or subshell around it), so $! is the pid to signal
# and to wait for: nothing of the service is left behind when the script ends.
node "${node_flags[@]}" apps/api/dist/main.js &
api=$!
node "${node_flags[@]}" apps/worker/dist/main.js &
worker=$!

name_of() { if [ "$1" = "$api" ]; then echo API; else echo worker; fi; }
# How a process ended, from its wait status.
how() {
  if [ "$1" -gt 128 ]; then
    echo "killed by SIG$(kill -l "$(($1 - 128))" 2>/dev/null || echo "$(($1 - 128))")"
  else
    echo "exit code $1"
  fi
}
alive() { kill -0 "$1" 2>/dev/null; }

# The worker hands its jobs back within WORKER_SHUTDOWN_GRACE_MS (25 s by default): past this, a
# process that has not ended is killed.
STOP_GRACE_SECONDS=40
# TERM to whichever still runs, wait for both (KILL past the grace); sets api_code and worker_code.
stop_both() {
  local pid deadline
  for pid in "$api" "$worker"; do alive "$pid" && kill -TERM "$pid" 2>/dev/null; done
  deadline=$((SECONDS + STOP_GRACE_SECONDS))
  while { alive "$api" || alive "$worker"; } && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  for pid in "$api" "$worker"; do
    if alive "$pid"; then
      log "the $(name_of "$pid") did not stop within ${STOP_GRACE_SECONDS}s; killing it"
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  wait "$api" 2>/dev/null
  api_code=$?
  wait "$worker" 2>/dev/null
  worker_code=$?
}

set +e
for _ in $(seq 1 100); do
  [ -z "$requested" ] || break
  curl -fsS "$url/health" >/dev/null 2>&1 && break
  alive "$api" && alive "$worker" || break
  sleep 0.1
done
if [ -z "$requested" ] && alive "$api" && alive "$worker"; then
  {
    printf '\n[tern] API:       %s   (docs: %s/docs, queues: %s/admin/queues)\n' "$url" "$url" "$url"
    if [ -n "$first_key" ]; then
      printf '[tern] First admin API key (shown once, keep it safe): %s\n' "$first_key"
      printf '[tern]   curl -H "Authorization: Bearer %s" %s/api/keys\n' "$first_key" "$url"
    fi
    printf '[tern] Ctrl-C stops API and worker.\n\n'
  } >&2
fi

# Either process ending ends both: the service is never half up. A signal interrupts `wait`.
ended=""
while [ -z "$requested" ] && [ -z "$ended" ]; do
  wait -n -p ended "$api" "$worker"
  code=$?
  # Neither is a child any more (not expected: wait -n names the one that ended).
  [ "$code" -ne 127 ] || [ -n "$ended" ] || { ended="$api"; break; }
done

if [ -n "$requested" ]; then
  log "stopping API and worker (SIG$requested)"
  stop_both
  if [ "$api_code" -ne 0 ] || [ "$worker_code" -ne 0 ]; then
    log "stopped: API $(how "$api_code"), worker $(how "$worker_code")"
    exit 1
  fi
  exit 0
fi

dead="$(name_of "$ended")"
log "the $dead exited ($(how "$code")); stopping the $([ "$dead" = API ] && echo worker || echo API)"
stop_both
log "stopped: the $dead had exited ($(how "$code")), so the service could not go on"
[ "$code" -ne 0 ] || code=1
exit "$code"
