#!/usr/bin/env bash
# Make sure a Redis server answers, with maxmemory-policy noeviction (BullMQ).
#
# - REDIS_URL set: only check that it answers; exit non-zero if not (and warn
#   if its maxmemory-policy is not noeviction: we do not reconfigure a server
#   we were pointed at).
# - Otherwise: local server on 127.0.0.1:6379. Start it if installed but not
#   running, install it (apt) if missing; set maxmemory-policy noeviction.
#
# Idempotent; prints nothing (to stderr, prefixed [tern]) unless it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
INSTALL_HINT="set REDIS_URL"

# ---------------------------------------------------------------- remote ----
if [ -n "${REDIS_URL:-}" ]; then
  have redis-cli || apt_install redis-tools
  rc() { timeout 10 redis-cli --no-auth-warning -u "$REDIS_URL" "$@" 2>/dev/null; }
  [ "$(rc PING || true)" = PONG ] ||
    die "Redis at REDIS_URL=$(redact "$REDIS_URL") does not answer"
  policy="$(rc CONFIG GET maxmemory-policy | sed -n 2p || true)"
  if [ -n "$policy" ] && [ "$policy" != noeviction ]; then
    log "warning: Redis at REDIS_URL has maxmemory-policy=$policy; BullMQ needs noeviction"
  fi
  exit 0
fi

# ----------------------------------------------------------------- local ----
RH=127.0.0.1
RP=6379

rc() { timeout 5 redis-cli -h "$RH" -p "$RP" "$@" 2>/dev/null; }
is_up() { have redis-cli && [ "$(rc PING || true)" = PONG ]; }

if ! is_up; then
  if ! have redis-server || ! have redis-cli; then
    apt_install redis-server
  fi
  # The package's own init script may have started one already.
  if ! is_up; then
    mkdir -p /var/lib/redis /var/log/redis ||
      die "cannot create /var/lib/redis and /var/log/redis (need root, or set REDIS_URL)"
    log "starting redis-server on $RH:$RP"
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$RP" \
      --save "" --appendonly no --dir /var/lib/redis \
      --logfile /var/log/redis/ci.log --maxmemory-policy noeviction >&2 ||
      die "could not start redis-server (see /var/log/redis/ci.log)"
  fi
  waited=0
  until is_up; do
    if [ "$waited" -ge 30 ]; then
      tail -n 30 /var/log/redis/ci.log >&2 2>/dev/null || true
      die "Redis on $RH:$RP did not answer within 30s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
fi

policy="$(rc CONFIG GET maxmemory-policy | sed -n 2p || true)"
if [ "$policy" != noeviction ]; then
  log "setting Redis maxmemory-policy noeviction (was ${policy:-unknown})"
  [ "$(rc CONFIG SET maxmemory-policy noeviction || true)" = OK ] ||
    die "could not set maxmemory-policy noeviction on $RH:$RP"
fi
