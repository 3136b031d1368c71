#!/usr/bin/env bash
# Sets up what the service needs (as scripts/start.sh does), then runs every check and test.
# Extra arguments go to vitest (e.g. scripts/test.sh apps/api).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/lib/ensure-pnpm.sh
bash scripts/lib/ensure-all.sh
bash scripts/lib/ensure-chromium.sh
bash scripts/lib/ensure-promtool.sh

pnpm --silent lint
pnpm --silent typecheck
pnpm exec vitest run "$@"
