#!/usr/bin/env bash
# Make sure pnpm is installed and the workspace's dependencies are installed.
#
# Installs pnpm@10.34.8 with npm when pnpm is missing, then runs
# `pnpm install --frozen-lockfile` at the repository root only when
# node_modules/.modules.yaml is missing or older than pnpm-lock.yaml
# (plain `pnpm install` when there is no lockfile yet).
#
# Idempotent; prints nothing (to stderr, prefixed [tern]) unless it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PNPM_VERSION=10.34.8

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Run a command with its output kept aside; show the output's end on failure.
run_logged() {
  local out rc=0
  out="$(mktemp)"
  "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$out" >&2
    rm -f "$out"
    die "failed ($rc): $*"
  fi
  rm -f "$out"
}

if ! have pnpm; then
  have npm || die "npm is missing; install Node.js 20+ first"
  log "installing pnpm@$PNPM_VERSION (npm install -g)"
  run_logged npm install -g --no-fund --no-audit --loglevel=error "pnpm@$PNPM_VERSION"
  hash -r
  have pnpm || die "pnpm was installed but is not on PATH (npm prefix: $(npm config get prefix))"
fi

cd "$ROOT"
[ -f package.json ] || exit 0 # no workspace yet: nothing to install

MODULES=node_modules/.modules.yaml
# Never prompt (pnpm asks before purging an incompatible node_modules).
NO_PROMPT=(--config.confirm-modules-purge=false)
if [ ! -f pnpm-lock.yaml ]; then
  log "pnpm install (no pnpm-lock.yaml yet)"
  run_logged pnpm install --no-frozen-lockfile "${NO_PROMPT[@]}"
elif [ ! -f "$MODULES" ] || [ pnpm-lock.yaml -nt "$MODULES" ]; then
  log "pnpm install --frozen-lockfile (node_modules missing or older than pnpm-lock.yaml)"
  run_logged pnpm install --frozen-lockfile "${NO_PROMPT[@]}"
else
  exit 0
fi
# pnpm may leave .modules.yaml untouched when nothing changed; mark it fresh
# so the next run does no work.
[ -f "$MODULES" ] && touch "$MODULES"
