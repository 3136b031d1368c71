#!/usr/bin/env bash
# Make sure an additional Docker engine N (2..54) runs on this machine, beside the main one, and
# print its DOCKER_HOST on stdout (the only thing this script prints there):
#
#   export DOCKER_HOST="$(bash scripts/lib/ensure-engine.sh 2)"
#   bash scripts/lib/ensure-engine.sh 2 stop   # stop it; its data stays in the loop file
#
# Engine N has its own
#   socket     /var/run/tern-docker-N.sock        (DOCKER_HOST=unix:///var/run/tern-docker-N.sock)
#   pid file   /var/run/tern-docker-N.pid         (dockerd; it runs its own containerd under the exec root)
#   exec root  /var/run/tern-docker-N
#   data root  /var/lib/tern-docker-N, a filesystem with quotas in the sparse loop file
#              /var/lib/tern-docker-N.xfs (XFS, pquota, overlay2) or, on kernels without XFS quota
#              support, /var/lib/tern-docker-N.btrfs (btrfs driver); TERN_ENGINE_DISK_GB (20) large.
#              Either way a container's writable layer can be limited (`StorageOpt size`, SANDBOX_DISK_MB).
#   config     /etc/tern/docker-N.json (dockerd --config-file; /etc/docker/daemon.json is the main engine's)
#   log        /var/log/tern-docker-N.log
#   addresses  default bridge tern-dockerN at 10.(200+N).255.1/24; networks it creates get /24s
#              of 10.(200+N).0.0/17
#   image      the sandbox image, copied from the main engine (TERN_MAIN_DOCKER_HOST, default the local
#              socket) or built (ensure-sandbox-image.sh)
#
# iptables: this dockerd runs with iptables off. Two dockerds cannot share Docker's chains: each flushes
# and rebuilds DOCKER and DOCKER-ISOLATION-* when it starts, which would drop the main engine's rules.
# What engine N needs (forwarding and masquerading of its own 10.(200+N)/16) is in chains of our own,
# TERN-ENGINE-N in the filter table (appended to FORWARD, so DOCKER-USER and the sandbox egress policy
# come first) and in the nat table (POSTROUTING). It follows that engine N does not enforce a network's
# enable_icc=false (Docker does that with iptables): the worker's egress policy is what keeps its
# sandboxes apart.
#
# TERN_RUNSC=1: register gVisor as runtime "runsc" too (the runsc package, installed with apt when
# missing), with --network=host: its own network stack does not start on this machine. Once
# registered it stays registered (a later call without TERN_RUNSC does not restart the engine).
#
# TERN_DOCKER_USERNS=1: the engine runs with userns-remap ("default": dockerd makes the user dockremap
# and its subordinate uid/gid range), so a container's root is an unprivileged uid of the host; the
# worker then gives its sandboxes sudo (SANDBOX_SUDO=auto). It is chosen when the engine starts and kept
# (recorded in its config): an engine running without it is not changed, stop it first. Its images live
# under a data root of their own (DATA_ROOT/<uid>.<gid>), so the sandbox image is copied in again.
#
# Idempotent and safe to run concurrently; logs (stderr, prefixed [tern]) only when it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
INSTALL_HINT="run the engine yourself and set DOCKER_HOST"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
N="${1:-}"
ACTION="${2:-start}"
case "$N" in
  [2-9] | [1-4][0-9] | 5[0-4]) ;;
  *) die "usage: ensure-engine.sh N [start|stop], N from 2 to 54 (engine 1 is the main one: ensure-docker.sh)" ;;
esac

NAME="tern-docker-$N"
SOCKET="/var/run/$NAME.sock"
HOST="unix://$SOCKET"
PID_FILE="/var/run/$NAME.pid"
EXEC_ROOT="/var/run/$NAME"
DATA_ROOT="/var/lib/$NAME"
CONFIG="/etc/tern/docker-$N.json"
LOG_FILE="/var/log/$NAME.log"
BRIDGE="tern-docker$N"
NET="10.$((200 + N))"
BRIDGE_CIDR="$NET.255.1/24"
POOL="$NET.0.0/17"
ALL="$NET.0.0/16"
CHAIN="TERN-ENGINE-$N"
MAIN_HOST="${TERN_MAIN_DOCKER_HOST:-unix:///var/run/docker.sock}"
WAIT_SECONDS=60

[ "$(id -u)" -eq 0 ] || die "engine $N needs root (dockerd, a loop mount, a bridge and iptables)"
for tool in ip iptables iptables-restore findmnt flock; do
  have "$tool" || die "$tool is missing"
done

mkdir -p /var/run
exec 8>"/var/run/$NAME.lock"
flock 8

# This engine's dockerd: its pid file's process, if that runs with this engine's config (not
# another engine's, nor whatever took the pid after a reboot).
engine_pid() { pid_of_file_matching "$PID_FILE" "--config-file $CONFIG"; }
answers() { DOCKER_HOST="$HOST" timeout 15 docker info >/dev/null 2>&1; }

# The rules engine N needs, in its own chains; replaced atomically, logged only when they change.
ensure_rules() {
  local want_filter want_nat
  want_filter="$(printf '%s\n' \
    "-N $CHAIN" \
    "-A $CHAIN -d $ALL -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT" \
    "-A $CHAIN -s $ALL -j ACCEPT")"
  want_nat="$(printf '%s\n' \
    "-N $CHAIN" \
    "-A $CHAIN -s $ALL ! -d $ALL -j MASQUERADE")"
  if [ "$(iptables -w -S "$CHAIN" 2>/dev/null)" != "$want_filter" ] ||
    [ "$(iptables -w -t nat -S "$CHAIN" 2>/dev/null)" != "$want_nat" ]; then
    log "installing iptables chains $CHAIN (filter, nat) for $ALL"
    iptables-restore -w --noflush <<EOF
*filter
:$CHAIN - [0:0]
-A $CHAIN -d $ALL -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A $CHAIN -s $ALL -j ACCEPT
COMMIT
*nat
:$CHAIN - [0:0]
-A $CHAIN -s $ALL ! -d $ALL -j MASQUERADE
COMMIT
EOF
  fi
  iptables -w -C FORWARD -j "$CHAIN" 2>/dev/null || iptables -w -A FORWARD -j "$CHAIN"
  iptables -w -t nat -C POSTROUTING -j "$CHAIN" 2>/dev/null || iptables -w -t nat -A POSTROUTING -j "$CHAIN"
  # Forwarding between interfaces, and bridged traffic seen by iptables (the egress policy relies on it).
  [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || {
    log "enabling net.ipv4.ip_forward"
    echo 1 >/proc/sys/net/ipv4/ip_forward
  }
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null || true
  if [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || true)" != 1 ]; then
    log "enabling net.bridge.bridge-nf-call-iptables"
    echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables || die "cannot enable bridge-nf-call-iptables (br_netfilter)"
  fi
}

remove_rules() {
  iptables -w -D FORWARD -j "$CHAIN" 2>/dev/null || true
  iptables -w -t nat -D POSTROUTING -j "$CHAIN" 2>/dev/null || true
  iptables -w -F "$CHAIN" 2>/dev/null && iptables -w -X "$CHAIN" 2>/dev/null || true
  iptables -w -t nat -F "$CHAIN" 2>/dev/null && iptables -w -t nat -X "$CHAIN" 2>/dev/null || true
}

ensure_bridge() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "creating bridge $BRIDGE ($BRIDGE_CIDR)"
    ip link add "$BRIDGE" type bridge
  fi
  ip -4 addr show dev "$BRIDGE" | grep -q "inet $BRIDGE_CIDR" || ip addr add "$BRIDGE_CIDR" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

# runsc is registered when asked, or when an earlier call registered it (never dropped silently).
want_runsc() {
  [ "${TERN_RUNSC:-}" = 1 ] || grep -q '"runsc"' "$CONFIG" 2>/dev/null
}

# userns-remap is kept once the engine was started with it (never dropped silently).
want_userns() {
  [ "${TERN_DOCKER_USERNS:-}" = 1 ] || grep -q '"userns-remap"' "$CONFIG" 2>/dev/null
}
runs_userns() {
  DOCKER_HOST="$HOST" timeout 15 docker info --format '{{json .SecurityOptions}}' 2>/dev/null | grep -q 'name=userns'
}

write_config() {
  local runtimes='{}' userns='{}'
  want_userns && userns='{"userns-remap": "default"}'
  if want_runsc; then
    have runsc || apt_install runsc
    runtimes="$(jq -n --arg path "$(command -v runsc)" '{runsc: {path: $path, runtimeArgs: ["--network=host"]}}')"
  fi
  mkdir -p "$(dirname "$CONFIG")"
  jq -n --arg host "$HOST" --arg pid "$PID_FILE" --arg data "$DATA_ROOT" --arg exec "$EXEC_ROOT" \
    --arg bridge "$BRIDGE" --arg pool "$POOL" --arg driver "$STORAGE_DRIVER" --argjson runtimes "$runtimes" \
    --argjson userns "$userns" '{
      hosts: [$host], pidfile: $pid, "data-root": $data, "exec-root": $exec,
      bridge: $bridge, "default-address-pools": [{base: $pool, size: 24}],
      iptables: false, "ip-masq": false, "storage-driver": $driver, runtimes: $runtimes
    } + $userns' >"$CONFIG.new"
}

stop_engine() {
  local pid waited=0
  pid="$(engine_pid || true)"
  if [ -n "$pid" ]; then
    log "stopping engine $N (dockerd pid $pid)"
    kill -TERM "$pid"
    while pid_alive "$pid"; do
      [ "$waited" -lt 60 ] || die "dockerd (pid $pid) did not stop within 60s"
      sleep 0.5
      waited=$((waited + 1))
    done
  fi
  if findmnt --mountpoint "$DATA_ROOT" >/dev/null 2>&1; then
    log "unmounting $DATA_ROOT"
    # Recursively: a dockerd that died without its shutdown leaves its storage driver's own mount
    # (btrfs: $DATA_ROOT/btrfs) inside.
    umount -R "$DATA_ROOT"
  fi
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "removing bridge $BRIDGE"
    ip link del "$BRIDGE"
  fi
  remove_rules
}

if [ "$ACTION" = stop ]; then
  stop_engine
  exit 0
fi
[ "$ACTION" = start ] || die "unknown action '$ACTION' (start or stop)"

have docker && have dockerd || apt_install docker.io
have jq || apt_install jq

ensure_quota_data_root "$DATA_ROOT" "$DATA_ROOT" "${TERN_ENGINE_DISK_GB:-20}"
ensure_bridge
ensure_rules
write_config

pid="$(engine_pid || true)"
if [ -n "$pid" ] && want_userns && answers && ! runs_userns; then
  rm -f "$CONFIG.new"
  die "engine $N runs without userns-remap; stop it (ensure-engine.sh $N stop) and start it with TERN_DOCKER_USERNS=1"
fi
if [ -n "$pid" ] && ! cmp -s "$CONFIG" "$CONFIG.new"; then
  # Only runtimes are added to a running engine's config, and dockerd reloads them on SIGHUP.
  mv "$CONFIG.new" "$CONFIG"
  log "reloading engine $N's configuration (runtimes)"
  kill -HUP "$pid"
else
  mv "$CONFIG.new" "$CONFIG"
fi

if [ -z "$pid" ]; then
  # A dockerd that finds its default bridge network in its store deletes it at start as stale, and
  # with it the host's docker0, which is the main engine's bridge. Each start of engine N therefore
  # begins with an empty network store (networks are re-created by whoever needs them).
  # (With userns-remap the store is under DATA_ROOT/<uid>.<gid>.)
  rm -f "$DATA_ROOT/network/files/local-kv.db" "$DATA_ROOT"/[0-9]*.[0-9]*/network/files/local-kv.db
  # dockerd refuses a pid file that names a live process, whichever it is; ours is not running.
  rm -f "$PID_FILE"
  clear_stale_containerd_pid "$EXEC_ROOT"
  log "starting engine $N: dockerd --config-file $CONFIG (log $LOG_FILE)"
  # setsid: not in our process group, so it outlives whoever ran us.
  # 8>&-: the lock is ours, not the engine's to hold for as long as it runs.
  setsid nohup dockerd --config-file "$CONFIG" </dev/null >>"$LOG_FILE" 2>&1 8>&- &
  pid=$!
fi

waited="$(await_dockerd "engine $N" "$pid" "$LOG_FILE" "$WAIT_SECONDS" answers)"
[ "$waited" -eq 0 ] || log "engine $N answers at $HOST (pid $pid)"
[ "$STORAGE_DRIVER" != btrfs ] || keep_btrfs_quotas_exact "$DATA_ROOT"

if want_runsc; then
  waited=0
  until DOCKER_HOST="$HOST" docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; do
    [ "$waited" -lt 20 ] || die "engine $N did not register runtime runsc (log: $LOG_FILE)"
    sleep 0.5
    waited=$((waited + 1))
  done
fi

DOCKER_HOST="$HOST" TERN_IMAGE_FROM="$MAIN_HOST" bash "$HERE/ensure-sandbox-image.sh"

printf '%s\n' "$HOST"
