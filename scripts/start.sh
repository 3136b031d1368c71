#!/usr/bin/env bash
# Runs the service: API and one worker in the foreground, local services started where none
# are configured. Ctrl-C (or SIGTERM) stops both cleanly.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/lib/ensure-pnpm.sh
bash scripts/lib/ensure-all.sh
pnpm --silent db:migrate >/dev/null

port="${PORT:-3000}"
url="${PUBLIC_URL:-http://localhost:$port}"
first_key="$(pnpm --silent cli keys create --name first-admin --admin --if-none)"

node --import tsx apps/api/src/main.ts &
api=$!
node --import tsx apps/worker/src/main.ts &
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
