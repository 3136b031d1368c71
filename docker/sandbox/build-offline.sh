#!/usr/bin/env bash
# Build the tern sandbox image without a container registry: the same image
# as docker/sandbox/Dockerfile, from a debootstrap'd Debian bookworm rootfs
# and `docker import`. Packages come from the Debian mirror this machine's own
# apt uses (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources);
# no package host is named here.
#
#   build-offline.sh [TAG]        (default tern-sandbox:latest; needs root)
#
# Environment:
#   TERN_DEBIAN_MIRROR           the Debian archive to use instead of the one in the apt sources
#   TERN_DEBIAN_SECURITY_MIRROR  the Debian security archive, likewise (none found: no security suite)
#   TERN_CACHE_DIR               (/var/cache/tern) build dir and the .deb caches live there
# Usually run through scripts/lib/ensure-sandbox-image.sh, which names the
# image after the content hash of this file and the Dockerfile.
set -euo pipefail

TAG="${1:-tern-sandbox:latest}"
CACHE="${TERN_CACHE_DIR:-/var/cache/tern}"
SUITE=bookworm
# The minimal system debootstrap lays down, then what the image adds with apt (the Dockerfile's list).
BASE_PACKAGES=bash,ca-certificates
PACKAGES=(
  bash git ca-certificates curl python3 python3-venv make procps tmux
  build-essential python3-dev python3-pip nodejs npm node-gyp
  git-lfs jq ripgrep unzip zip file less openssh-client sudo
)

log() { printf '[tern] %s\n' "$*" >&2; }
die() { printf '[tern] error: %s\n' "$*" >&2; exit 1; }

# Every enabled `deb` source of this machine's apt as "URI SUITE" lines: one-line .list files and
# deb822 .sources files alike (a stanza per blank-line-separated block; comments skipped).
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '{ sub(/#.*/, "") }
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
        if (i + 1 <= NF) print $i, $(i + 1)
      }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush(   u, s, nu, ns, a, b) {
        if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no") {
          nu = split(uris, a, " "); ns = split(suites, b, " ")
          for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print a[u], b[s]
        }
        types = ""; uris = ""; suites = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^[A-Za-z-]+:/ {
        key = tolower($1); sub(/:$/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
        if (key == "types") types = val
        else if (key == "uris") uris = val
        else if (key == "suites") suites = val
        else if (key == "enabled") enabled = val
      }
      END { flush() }' "$f"
  done
}

# The archive serving suite $1 in the apt sources: the first source naming it exactly, else (for the
# main archive only) one naming any Debian suite, since a Debian mirror carries them all.
source_for() {
  local want=$1 any=${2:-}
  apt_sources | awk -v want="$want" -v any="$any" '
    { sub(/\/+$/, "", $1) }
    $2 == want { print $1; found = 1; exit }
    any != "" && $2 ~ ("^(" any ")$") && fallback == "" { fallback = $1 }
    END { if (!found && fallback != "") print fallback }'
}

DEBIAN_SUITES='bullseye|bookworm|trixie|forky|sid|oldstable|stable|testing|unstable'
MIRROR="${TERN_DEBIAN_MIRROR:-$(source_for "$SUITE" "$DEBIAN_SUITES")}"
SECURITY="${TERN_DEBIAN_SECURITY_MIRROR:-$(source_for "$SUITE-security" "")}"
[ -n "$MIRROR" ] ||
  die "no Debian archive in this machine's apt sources (/etc/apt/sources.list*); set TERN_DEBIAN_MIRROR"

[ "$(id -u)" -eq 0 ] || die "build-offline.sh needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"
command -v docker >/dev/null || die "docker is missing"

mkdir -p "$CACHE/debs" "$CACHE/apt-archives/partial"
BUILD="$(mktemp -d "$CACHE/sandbox-build.XXXXXX")"
ROOTFS="$BUILD/rootfs"
BUILD_LOG="$BUILD/build.log"

unmount_all() {
  umount "$ROOTFS/var/cache/apt/archives" 2>/dev/null || true
  umount "$ROOTFS/proc" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  unmount_all
  if [ "$rc" -ne 0 ] && [ -f "$BUILD_LOG" ]; then
    tail -n 30 "$BUILD_LOG" >&2 || true
    cp "$BUILD_LOG" "$CACHE/sandbox-build-failed.log" 2>/dev/null &&
      log "full log: $CACHE/sandbox-build-failed.log"
  fi
  rm -rf --one-file-system "$BUILD"
}
trap cleanup EXIT

in_root() {
  chroot "$ROOTFS" /usr/bin/env -i \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

log "debootstrap $SUITE (minbase) from $MIRROR"
debootstrap --variant=minbase --include="$BASE_PACKAGES" --cache-dir="$CACHE/debs" \
  "$SUITE" "$ROOTFS" "$MIRROR" >>"$BUILD_LOG" 2>&1 ||
  die "debootstrap failed"

# Like debian:bookworm-slim: no docs, man pages or translations, now or later.
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker" <<'EOT'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOT
find "$ROOTFS/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "${ROOTFS:?}/usr/share/man/"* "$ROOTFS/usr/share/groff/"* "$ROOTFS/usr/share/info/"* \
  "$ROOTFS/usr/share/lintian/"* "$ROOTFS/usr/share/linda/"* "$ROOTFS/usr/share/locale/"*
# The build's own dpkg skips fsync (the rootfs is thrown away if the build fails); not kept in the image.
printf 'force-unsafe-io\n' >"$ROOTFS/etc/dpkg/dpkg.cfg.d/tern-build"

# The sources the image keeps: the same archives as this build, so security updates reach it too.
rm -f "$ROOTFS/etc/apt/sources.list"
{
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$MIRROR" "$SUITE" "$SUITE"
  printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
  if [ -n "$SECURITY" ]; then
    printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$SECURITY" "$SUITE"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
  fi
} >"$ROOTFS/etc/apt/sources.list.d/debian.sources"
[ -n "$SECURITY" ] ||
  log "no $SUITE-security archive in this machine's apt sources: the image gets no security suite (TERN_DEBIAN_SECURITY_MIRROR)"
# No services may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"

mount -t proc proc "$ROOTFS/proc"
# apt's downloads are kept between builds, like debootstrap's.
mount --bind "$CACHE/apt-archives" "$ROOTFS/var/cache/apt/archives"
log "installing ${#PACKAGES[@]} packages with their dependencies, and $SUITE's updates and security fixes"
in_root apt-get update -q >>"$BUILD_LOG" 2>&1 || die "apt-get update in the rootfs failed"
in_root apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>"$BUILD_LOG" 2>&1 ||
  die "apt-get install in the rootfs failed"
in_root apt-get -y -q -o Dpkg::Options::=--force-confold upgrade >>"$BUILD_LOG" 2>&1 ||
  die "apt-get upgrade in the rootfs failed"

log "configuring user agent (sudo), /workspace and git"
in_root /bin/bash -euc '
  groupadd --gid 1000 agent
  useradd --uid 1000 --gid 1000 --home-dir /home/agent --create-home --shell /bin/bash agent
  mkdir -p /workspace
  chown agent:agent /workspace
  git config --system init.defaultBranch main
  git config --system --add safe.directory "*"
  # sudo works only on an engine that maps root to an unprivileged user (the worker lifts
  # no-new-privileges there); elsewhere the kernel refuses it. No other program keeps a setuid
  # or setgid bit: su, mount, passwd and the like are no way to root, on any engine.
  printf "agent ALL=(ALL:ALL) NOPASSWD: ALL\n" >/etc/sudoers.d/agent
  chmod 0440 /etc/sudoers.d/agent
  find / -xdev -type f -perm /6000 ! -path /usr/bin/sudo -exec chmod ug-s {} +
' >>"$BUILD_LOG" 2>&1 || die "configuring the rootfs failed"
unmount_all

# Keep it small and free of build-host traces; docker provides /dev,
# /etc/hosts, /etc/hostname and /etc/resolv.conf at run time.
rm -f "$ROOTFS/usr/sbin/policy-rc.d" "$ROOTFS/etc/dpkg/dpkg.cfg.d/tern-build"
rm -rf "${ROOTFS:?}/var/lib/apt/lists/"* "$ROOTFS/var/cache/apt/"*.bin \
  "$ROOTFS/var/cache/apt/archives/"*.deb "$ROOTFS/var/cache/debconf/"*-old \
  "$ROOTFS/var/log/"* "$ROOTFS/tmp/"* "$ROOTFS/var/tmp/"* "$ROOTFS/root/".bash_history \
  "$ROOTFS/root/.cache" "${ROOTFS:?}/dev/"*
mkdir -p "$ROOTFS/var/lib/apt/lists/partial"
: >"$ROOTFS/etc/resolv.conf"
printf 'localhost\n' >"$ROOTFS/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOTFS/etc/hosts"

log "importing the rootfs as $TAG"
tar --numeric-owner --xattrs -C "$ROOTFS" -c . |
  docker import \
    --change 'USER agent' \
    --change 'WORKDIR /workspace' \
    --change 'CMD ["sleep","infinity"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HOME=/home/agent' \
    - "$TAG" >/dev/null
