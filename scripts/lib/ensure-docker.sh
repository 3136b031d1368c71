#!/usr/bin/env bash
# Make sure a Docker engine answers (`docker info`, DOCKER_HOST respected).
#
# If none answers and DOCKER_HOST is unset or the local socket, start dockerd
# in the background (installing docker.io with apt if dockerd is missing):
#   log  /var/log/tern-dockerd.log
#   pid  /var/run/tern-dockerd.pid
# Extra dockerd flags: TERN_DOCKERD_FLAGS (none are needed on this machine).
#
# By default a dockerd started here keeps Docker's own defaults: overlay2 on the
# host's filesystem, where the worker watches each sandbox's disk use itself.
# Opt-ins:
#   TERN_DOCKER_XFS=1  a dockerd started here keeps its data root in
#                      /var/lib/tern-docker, a filesystem with quotas in a loop
#                      file (XFS with pquota, or btrfs where the kernel has no XFS
#                      quotas; see ensure_quota_data_root in common.sh), so the
#                      engine itself holds each container to a hard disk limit
#                      (TERN_DOCKER_DISK_GB, default 80% of the free space,
#                      sparse). It costs container creation time (the README has
#                      the numbers). A running engine is never moved: stop it
#                      and run this again.
#   TERN_RUNSC=1       register gVisor as runtime "runsc" (the runsc package,
#                      installed with apt when missing) in /etc/docker/daemon.json
#                      with --network=host, and have a running dockerd reload it
#                      (SIGHUP: runtimes reload without a restart).
#
# Idempotent; prints nothing (to stderr, prefixed [tern]) unless it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
INSTALL_HINT="run a Docker engine and set DOCKER_HOST"

LOG_FILE=/var/log/tern-dockerd.log
PID_FILE=/var/run/tern-dockerd.pid
WAIT_SECONDS=60

DAEMON_JSON=/etc/docker/daemon.json
XFS_ROOT=/var/lib/tern-docker

docker_ok() { have docker && timeout 15 docker info >/dev/null 2>&1; }
has_runsc() { timeout 15 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

# The local dockerd's pid (ours, or one started another way), for a reload.
# The local dockerd: ours (started with our pid file), or one the system started (/var/run/docker.pid).
local_dockerd_pid() {
  pid_of_file_matching "$PID_FILE" "--pidfile $PID_FILE" || pid_of_file_matching /var/run/docker.pid dockerd
}

# runsc as a runtime in daemon.json, with its network stack on the host's kernel (gVisor's own
# does not start on every machine; the sandbox keeps its own network namespace, so the egress
# rules still apply). Leaves every other setting of the file as it is.
write_runsc_config() {
  have runsc || apt_install runsc
  have jq || apt_install jq
  mkdir -p "$(dirname "$DAEMON_JSON")"
  local current='{}'
  [ -s "$DAEMON_JSON" ] && current="$(cat "$DAEMON_JSON")"
  jq --arg path "$(command -v runsc)" '.runtimes.runsc = {path: $path, runtimeArgs: ["--network=host"]}' \
    <<<"$current" >"$DAEMON_JSON.tern-new" || die "$DAEMON_JSON is not valid JSON"
  if ! cmp -s "$DAEMON_JSON.tern-new" "$DAEMON_JSON"; then
    log "registering runtime runsc in $DAEMON_JSON"
    mv "$DAEMON_JSON.tern-new" "$DAEMON_JSON"
    return 0
  fi
  rm -f "$DAEMON_JSON.tern-new"
  return 1
}

if docker_ok; then
  if [ "${TERN_DOCKER_XFS:-}" = 1 ]; then
    storage="$(docker info --format '{{.Driver}} {{range .DriverStatus}}{{if eq (index . 0) "Backing Filesystem"}}{{index . 1}}{{end}}{{end}}' 2>/dev/null || true)"
    case "$storage" in
      btrfs*)
        root="$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || true)"
        if [ "$(id -u)" -eq 0 ] && [ -n "$root" ] && findmnt --mountpoint "$root" >/dev/null 2>&1; then
          keep_btrfs_quotas_exact "$root"
        fi
        ;;
      "overlay2 xfs" | zfs*) ;;
      *) log "TERN_DOCKER_XFS=1, but the running engine keeps its data on '$storage' and is left as it is; stop it and run this again to move it" ;;
    esac
  fi
  if [ "${TERN_RUNSC:-}" = 1 ] && ! has_runsc; then
    case "${DOCKER_HOST:-}" in
      "" | unix:///var/run/docker.sock | unix:///run/docker.sock) ;;
      *) die "TERN_RUNSC=1: register runsc on the engine at DOCKER_HOST=$DOCKER_HOST yourself" ;;
    esac
    [ "$(id -u)" -eq 0 ] || die "TERN_RUNSC=1: registering runsc needs root"
    pid="$(local_dockerd_pid)" || die "TERN_RUNSC=1: cannot find the local dockerd's pid to reload it"
    write_runsc_config || true
    log "reloading dockerd (pid $pid) for runtime runsc"
    kill -HUP "$pid"
    for _ in $(seq 1 40); do
      has_runsc && exit 0
      sleep 0.5
    done
    die "dockerd did not register runsc after a reload (see $LOG_FILE or its own log)"
  fi
  exit 0
fi

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

pid=""
if pid="$(pid_of_file_matching "$PID_FILE" "--pidfile $PID_FILE")"; then
  log "dockerd (pid $pid) is running but does not answer yet; waiting"
elif pid="$(pid_of_file_matching /var/run/docker.pid dockerd)"; then
  log "a dockerd (pid $pid, not started by tern) is running but does not answer yet; waiting"
else
  rm -f "$PID_FILE"
  clear_stale_containerd_pid /var/run/docker
  extra=()
  if [ "${TERN_DOCKER_XFS:-}" = 1 ]; then
    # Sparse, so only what is written takes room; 80% of the free space keeps the host's disk
    # from running out under a filesystem that believes it has more.
    free_gb="$(df --output=avail -BG "$(dirname "$XFS_ROOT")" | tail -n 1 | tr -dc 0-9)"
    ensure_quota_data_root "$XFS_ROOT" "$XFS_ROOT" "${TERN_DOCKER_DISK_GB:-$((free_gb * 8 / 10))}"
    extra+=(--data-root "$XFS_ROOT" --storage-driver "$STORAGE_DRIVER")
  fi
  [ "${TERN_RUNSC:-}" = 1 ] && { write_runsc_config || true; }
  log "starting dockerd (log $LOG_FILE)"
  # setsid: not in our process group, so it outlives whoever ran us.
  # shellcheck disable=SC2086
  setsid nohup dockerd --pidfile "$PID_FILE" "${extra[@]}" ${TERN_DOCKERD_FLAGS:-} \
    </dev/null >>"$LOG_FILE" 2>&1 &
  pid=$!
fi

waited="$(await_dockerd "the Docker engine" "$pid" "$LOG_FILE" "$WAIT_SECONDS" docker_ok)"
log "dockerd answers (pid $pid, ${waited}s)"
if [ "${TERN_DOCKER_XFS:-}" = 1 ] && [ "${STORAGE_DRIVER:-}" = btrfs ]; then
  keep_btrfs_quotas_exact "$XFS_ROOT"
fi
