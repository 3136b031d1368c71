#!/usr/bin/env bash
# Runs the service: API and one worker in the foreground, local services started where none
# are configured. Ctrl-C (or SIGTERM) stops both cleanly.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/lib/ensure-pnpm.sh
# A Docker engine started here keeps its data on a filesystem with quotas: the worker refuses to
# run sandboxes it cannot hold to SANDBOX_DISK_MB. An engine already running is left as it is.
TERN_DOCKER_XFS="${TERN_DOCKER_XFS:-1}" bash scripts/lib/ensure-all.sh
# Compiled JavaScript only at run time (no TypeScript loader): packages resolve to their dist/
# under the tern-dist condition.
pnpm --silent build >/dev/null
run() { node --conditions=tern-dist --enable-source-maps "$@"; }
# Migrations run once, here, under Postgres's advisory lock; the api and the worker only check
# the schema and refuse to start when it is behind.
run packages/db/dist/cli.js >/dev/null

port="${PORT:-3000}"
url="${PUBLIC_URL:-http://localhost:$port}"
first_key="$(run apps/cli/dist/main.js keys create --name first-admin --admin --if-none)"

run apps/api/dist/main.js &
api=$!
run apps/worker/dist/main.js &
worker=$!

stop() {
  trap - INT TERM
  kill -TERM "$api" "$worker" 2>/dev/null || true
  wait "$api" "$worker" 2>/dev/null || true
}
trap 'stop; exit 0' INT TERM

for _ in $(seq 1 100); do
  curl -fsS "$url/health" >/dev/null 2>&1 && break
  kill -0 "$api" 2>/dev/null || break
  sleep 0.1
done
{
  printf '\n[tern] API:       %s   (docs: %s/docs, queues: %s/admin/queues)\n' "$url" "$url" "$url"
  if [ -n "$first_key" ]; then
    printf '[tern] First admin API key (shown once, keep it safe): %s\n' "$first_key"
    printf '[tern]   curl -H "Authorization: Bearer %s" %s/api/keys\n' "$first_key" "$url"
  fi
  printf '[tern] Ctrl-C stops API and worker.\n\n'
} >&2

# Either process ending ends both: the service is not half up.
set +e
wait -n "$api" "$worker"
code=$?
stop
exit "$code"
