#!/usr/bin/env bash
# Make sure a Docker engine answers (`docker info`, DOCKER_HOST respected).
#
# If none answers and DOCKER_HOST is unset or the local socket, start dockerd
# in the background (installing docker.io with apt if dockerd is missing):
#   log  /var/log/tern-dockerd.log
#   pid  /var/run/tern-dockerd.pid
# Extra dockerd flags: TERN_DOCKERD_FLAGS (none are needed on this machine).
#
# Idempotent; prints nothing (to stderr, prefixed [tern]) unless it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
INSTALL_HINT="run a Docker engine and set DOCKER_HOST"

LOG_FILE=/var/log/tern-dockerd.log
PID_FILE=/var/run/tern-dockerd.pid
WAIT_SECONDS=60

docker_ok() { have docker && timeout 15 docker info >/dev/null 2>&1; }

docker_ok && exit 0

# A remote engine (or a socket somewhere else) is not ours to start.
case "${DOCKER_HOST:-}" in
  "" | unix:///var/run/docker.sock | unix:///run/docker.sock) ;;
  *) die "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST" ;;
esac

if [ "$(id -u)" -ne 0 ]; then
  if [ -S /var/run/docker.sock ]; then
    die "a Docker engine runs but $(id -un) cannot use /var/run/docker.sock (join the docker group, or set DOCKER_HOST)"
  fi
  die "no Docker engine answers and starting one needs root (start dockerd, or set DOCKER_HOST)"
fi

if ! have dockerd || ! have docker; then
  have apt-get || die "dockerd not found and apt-get unavailable; install Docker yourself"
  apt_install docker.io
fi

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

pid=""
if [ -s "$PID_FILE" ] && pid_alive "$(cat "$PID_FILE")" &&
  grep -q dockerd "/proc/$(cat "$PID_FILE")/comm" 2>/dev/null; then
  pid="$(cat "$PID_FILE")"
  log "dockerd (pid $pid) is running but does not answer yet; waiting"
elif [ -s /var/run/docker.pid ] && pid_alive "$(cat /var/run/docker.pid)" &&
  grep -q dockerd "/proc/$(cat /var/run/docker.pid)/comm" 2>/dev/null; then
  pid="$(cat /var/run/docker.pid)"
  log "a dockerd (pid $pid, not started by tern) is running but does not answer yet; waiting"
else
  rm -f "$PID_FILE"
  log "starting dockerd (log $LOG_FILE)"
  # setsid: not in our process group, so it outlives whoever ran us.
  # shellcheck disable=SC2086
  setsid nohup dockerd --pidfile "$PID_FILE" ${TERN_DOCKERD_FLAGS:-} \
    </dev/null >>"$LOG_FILE" 2>&1 &
  pid=$!
fi

waited=0
until docker_ok; do
  if ! pid_alive "$pid"; then
    tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
    die "dockerd exited (log: $LOG_FILE)"
  fi
  if [ "$waited" -ge "$WAIT_SECONDS" ]; then
    tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
    die "dockerd did not answer within ${WAIT_SECONDS}s (pid $pid, log: $LOG_FILE)"
  fi
  sleep 1
  waited=$((waited + 1))
done
log "dockerd answers (pid $pid, ${waited}s)"
