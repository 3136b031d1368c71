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
# What ensure-all.sh does, in its order, with the browser, promtool and busybox (four test files use them)
# installed while the sandbox image builds: the build takes no apt lock. Its debootstrap comes first
# (as root; else the build installs it), so the build never waits behind them for the lock.
bash scripts/lib/ensure-postgres.sh
bash scripts/lib/ensure-redis.sh
bash scripts/lib/ensure-docker.sh
# shellcheck source=lib/common.sh
(source scripts/lib/common.sh && { have debootstrap || [ "$(id -u)" -ne 0 ] || apt_install debootstrap; })
(bash scripts/lib/ensure-chromium.sh && bash scripts/lib/ensure-promtool.sh && bash scripts/lib/ensure-busybox.sh) >"$checks/tools.log" 2>&1 &
tools=$!
bash scripts/lib/ensure-sandbox-image.sh
tools_status=0
wait "$tools" || tools_status=$?
cat "$checks/tools.log" >&2
[ "$tools_status" -eq 0 ] || exit "$tools_status"
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
