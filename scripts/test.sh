#!/usr/bin/env bash
# Sets up what the service needs (as scripts/start.sh does), then runs every check and test.
# Extra arguments go to vitest (e.g. scripts/test.sh apps/api).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/lib/ensure-pnpm.sh

# Lint and typecheck need only node_modules: they run beside the rest of the set-up and the tests
# (a minute of CI saved), each into its own log, shown at the end. Either failing fails the run.
checks=$(mktemp -d)
trap 'rm -rf "$checks"' EXIT
pnpm --silent lint >"$checks/lint.log" 2>&1 &
lint=$!
pnpm --silent typecheck >"$checks/typecheck.log" 2>&1 &
typecheck=$!

status=0
bash scripts/lib/ensure-all.sh
bash scripts/lib/ensure-chromium.sh
bash scripts/lib/ensure-promtool.sh
pnpm exec vitest run "$@" || status=$?

for check in lint typecheck; do
  if wait "${!check}"; then
    printf '[tern] %s passed\n' "$check"
  else
    printf '[tern] %s failed:\n' "$check"
    cat "$checks/$check.log"
    status=1
  fi
done
exit "$status"
