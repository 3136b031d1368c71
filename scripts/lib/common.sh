# Shared by scripts/lib/ensure-*.sh (sourced, not run). Messages go to stderr, prefixed [tern].

log() { printf '[tern] %s\n' "$*" >&2; }
die() { printf '[tern] error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# await_dockerd WHAT PID LOG SECONDS CHECK...: runs CHECK every half second until it succeeds, and
# prints the whole seconds it waited (0: at once). Dies naming WHAT, with the log's tail, once the
# dockerd of PID has exited or SECONDS have passed.
await_dockerd() {
  local what=$1 pid=$2 log_file=$3 seconds=$4 waited=0
  shift 4
  until "$@"; do
    if ! pid_alive "$pid"; then
      tail -n 30 "$log_file" >&2 2>/dev/null || true
      die "$what: its dockerd exited (log: $log_file)"
    fi
    if [ "$waited" -ge "$((seconds * 2))" ]; then
      tail -n 30 "$log_file" >&2 2>/dev/null || true
      die "$what did not answer within ${seconds}s (pid $pid, log: $log_file)"
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  printf '%s\n' "$((waited / 2))"
}

# Hides the password of a URL in messages.
redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$1"; }

# A pid file's process, when it is alive and its command line holds PATTERN (a fixed string): the
# file's pid can belong to anything else after a reboot (/run is kept on this kind of machine) or
# once the process died, and a pid is only ours if its command line says so.
pid_of_file_matching() {
  local file=$1 pattern=$2 pid
  pid="$(tr -dc 0-9 <"$file" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pattern" &&
    printf '%s\n' "$pid"
}

# Before a dockerd starts on EXEC_ROOT: a containerd.pid left there by a containerd that is gone.
# dockerd takes any live process of that pid for its containerd, waits for a socket nobody opens
# and exits ("timeout waiting for containerd to start"): after a reboot or a kill, the pid is
# often some other process's.
clear_stale_containerd_pid() {
  local file="$1/containerd/containerd.pid"
  [ -e "$file" ] || return 0
  pid_of_file_matching "$file" "$1/containerd/containerd.toml" >/dev/null && return 0
  log "removing stale $file"
  rm -f "$file"
}

# apt-get install, with `apt-get update` only when the first attempt fails.
# INSTALL_HINT says what the user can do instead (e.g. "set DATABASE_URL").
# Two installs at once (two test engines set up side by side, or a user's apt beside start.sh) take
# turns on dpkg's lock instead of failing on it.
APT_LOCK_WAIT=(-o DPkg::Lock::Timeout=600)
apt_install() {
  local hint="${INSTALL_HINT:-install it yourself}"
  [ "$(id -u)" -eq 0 ] || die "need root to install $* (or $hint)"
  have apt-get || die "apt-get not found; install $* yourself (or $hint)"
  local out
  out="$(mktemp)"
  log "installing $* (apt-get)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get "${APT_LOCK_WAIT[@]}" install -y -q "$@" >"$out" 2>&1; then
    log "apt-get install failed; running apt-get update and retrying"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get "${APT_LOCK_WAIT[@]}" update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get "${APT_LOCK_WAIT[@]}" install -y -q "$@"; } >"$out" 2>&1; then
      tail -n 30 "$out" >&2
      rm -f "$out"
      die "could not install $*"
    fi
  fi
  rm -f "$out"
}

# Mounts at DIR a filesystem on which Docker can limit each container's writable layer
# (`StorageOpt size`, i.e. SANDBOX_DISK_MB), from the sparse loop file BASE.xfs or BASE.btrfs
# (SIZE_GB large, made and formatted when neither exists), and sets STORAGE_DRIVER for dockerd:
# - XFS with project quotas (pquota), under overlay2: the usual choice;
# - btrfs with quota groups, under the btrfs driver: where the kernel has no XFS quota support
#   (CONFIG_XFS_QUOTA unset, as on this project's build machine). Its limit counts the image's
#   files too, as a container's snapshot references them.
# TERN_DATA_ROOT_FS=xfs|btrfs forces one. Quiet when DIR already is such a mount.
ensure_quota_data_root() {
  local base=$1 dir=$2 size_gb=$3 mounted fs
  mounted="$(findmnt -n -o FSTYPE,OPTIONS --mountpoint "$dir" 2>/dev/null || true)"
  case "$mounted" in
    "") ;;
    xfs*prjquota*) STORAGE_DRIVER=overlay2 && return 0 ;;
    btrfs*) STORAGE_DRIVER=btrfs && return 0 ;;
    *) die "$dir is mounted ($mounted), but neither as XFS with project quotas nor as btrfs; unmount it first" ;;
  esac
  [ "$(id -u)" -eq 0 ] || die "mounting a data root with quotas at $dir needs root"
  mkdir -p "$dir" "$(dirname "$base")"
  # Mounting over files would hide them, not move them: never do it silently.
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty; move its content away before a data root with quotas is mounted there"
  if [ -e "$base.xfs" ]; then
    fs=xfs
  elif [ -e "$base.btrfs" ]; then
    fs=btrfs
  else
    fs="${TERN_DATA_ROOT_FS:-auto}"
  fi
  case "$fs" in xfs | btrfs | auto) ;; *) die "TERN_DATA_ROOT_FS must be xfs or btrfs, not '$fs'" ;; esac

  if [ "$fs" != btrfs ]; then
    have mkfs.xfs || apt_install xfsprogs
    if [ ! -e "$base.xfs" ]; then
      log "creating $base.xfs (${size_gb}G sparse, XFS)"
      truncate -s "${size_gb}G" "$base.xfs"
      mkfs.xfs -q "$base.xfs" || { rm -f "$base.xfs"; die "mkfs.xfs $base.xfs failed"; }
    fi
    log "mounting $base.xfs at $dir (XFS, pquota)"
    if mount -o loop,pquota "$base.xfs" "$dir" 2>/dev/null; then
      STORAGE_DRIVER=overlay2
      return 0
    fi
    [ "$fs" = auto ] || die "could not mount $base.xfs at $dir with pquota (kernel without CONFIG_XFS_QUOTA? try TERN_DATA_ROOT_FS=btrfs)"
    log "this kernel cannot mount XFS with project quotas; using btrfs with quota groups instead"
    rm -f "$base.xfs"
  fi

  have mkfs.btrfs || apt_install btrfs-progs
  if [ ! -e "$base.btrfs" ]; then
    log "creating $base.btrfs (${size_gb}G sparse, btrfs)"
    truncate -s "${size_gb}G" "$base.btrfs"
    mkfs.btrfs -q "$base.btrfs" >/dev/null 2>&1 || { rm -f "$base.btrfs"; die "mkfs.btrfs $base.btrfs failed"; }
  fi
  log "mounting $base.btrfs at $dir (btrfs, quota groups)"
  mount -o loop "$base.btrfs" "$dir" || die "could not mount $base.btrfs at $dir (loop devices available?)"
  STORAGE_DRIVER=btrfs
}

# For a running engine on a btrfs data root (after ensure_quota_data_root), since:
# - Docker's btrfs driver turns quotas off when the engine stops, and on only at the first
#   container with a size limit: they are turned on here, once the engine runs;
# - btrfs enforces quota-group limits only while their accounting is consistent, and by default
#   (drop_subtree_threshold 3) gives up on exact accounting when it deletes a large snapshot, as
#   Docker does with every removed container: limits then silently stop holding. Level 8 (the
#   deepest a btrfs tree goes) keeps it exact; a filesystem already inconsistent is rescanned.
keep_btrfs_quotas_exact() {
  local dir=$1 dev uuid sys
  dev="$(findmnt -n -o SOURCE --mountpoint "$dir" | head -n 1)"
  uuid="$(blkid -p -s UUID -o value "$dev" 2>/dev/null || true)"
  [ -n "$uuid" ] || die "cannot find the btrfs filesystem id of $dir ($dev)"
  sys="/sys/fs/btrfs/$uuid/qgroups"
  if [ ! -d "$sys" ]; then
    btrfs quota enable "$dir" || die "could not enable btrfs quotas on $dir"
    btrfs quota rescan -w "$dir" >/dev/null 2>&1 || true
  fi
  [ -d "$sys" ] || die "btrfs quotas are not enabled on $dir (no $sys)"
  if [ -w "$sys/drop_subtree_threshold" ] && [ "$(cat "$sys/drop_subtree_threshold")" != 8 ]; then
    echo 8 >"$sys/drop_subtree_threshold"
  fi
  if [ "$(cat "$sys/inconsistent" 2>/dev/null || echo 0)" != 0 ]; then
    log "rescanning the quota groups of $dir (their accounting was inconsistent, so limits did not hold)"
    btrfs quota rescan -w "$dir" >/dev/null || die "btrfs quota rescan of $dir failed"
  fi
}
