#!/usr/bin/env bash
# Build the tern sandbox image without a container registry: the same image
# as docker/sandbox/Dockerfile, from a debootstrap'd Debian bookworm rootfs
# (packages from deb.debian.org) and `docker import`.
#
#   build-offline.sh [TAG]        (default tern-sandbox:latest; needs root)
#
# Environment: TERN_DEBIAN_MIRROR (http://deb.debian.org/debian),
#   TERN_CACHE_DIR (/var/cache/tern; build dir and the .deb cache live there).
# Usually run through scripts/lib/ensure-sandbox-image.sh, which names the
# image after the content hash of this file and the Dockerfile.
set -euo pipefail

TAG="${1:-tern-sandbox:latest}"
MIRROR="${TERN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${TERN_CACHE_DIR:-/var/cache/tern}"
SUITE=bookworm
PACKAGES=bash,git,ca-certificates,curl,python3,python3-venv,make,procps,tmux

log() { printf '[tern] %s\n' "$*" >&2; }
die() { printf '[tern] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "build-offline.sh needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"
command -v docker >/dev/null || die "docker is missing"

mkdir -p "$CACHE/debs"
BUILD="$(mktemp -d "$CACHE/sandbox-build.XXXXXX")"
ROOTFS="$BUILD/rootfs"
BUILD_LOG="$BUILD/build.log"

cleanup() {
  local rc=$?
  umount "$ROOTFS/proc" 2>/dev/null || true
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

log "debootstrap $SUITE ($PACKAGES) from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs" \
  "$SUITE" "$ROOTFS" "$MIRROR" >>"$BUILD_LOG" 2>&1 ||
  die "debootstrap failed"

# Like debian:bookworm-slim: no docs, man pages or translations, now or later.
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
find "$ROOTFS/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "${ROOTFS:?}/usr/share/man/"* "$ROOTFS/usr/share/groff/"* "$ROOTFS/usr/share/info/"* \
  "$ROOTFS/usr/share/lintian/"* "$ROOTFS/usr/share/linda/"* "$ROOTFS/usr/share/locale/"*

# Same sources as the official image, so security updates reach us too.
rm -f "$ROOTFS/etc/apt/sources.list"
cat >"$ROOTFS/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# No services may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"

mount -t proc proc "$ROOTFS/proc"
log "applying $SUITE updates and security fixes"
in_root apt-get update -q >>"$BUILD_LOG" 2>&1 || die "apt-get update in the rootfs failed"
in_root apt-get -y -q -o Dpkg::Options::=--force-confold upgrade >>"$BUILD_LOG" 2>&1 ||
  die "apt-get upgrade in the rootfs failed"

log "configuring user agent, /workspace and git"
in_root /bin/bash -euc '
  groupadd --gid 1000 agent
  useradd --uid 1000 --gid 1000 --home-dir /home/agent --create-home --shell /bin/bash agent
  mkdir -p /workspace
  chown agent:agent /workspace
  git config --system init.defaultBranch main
  git config --system --add safe.directory "*"
  apt-get clean
' >>"$BUILD_LOG" 2>&1 || die "configuring the rootfs failed"
umount "$ROOTFS/proc"

# Keep it small and free of build-host traces; docker provides /dev,
# /etc/hosts, /etc/hostname and /etc/resolv.conf at run time.
rm -f "$ROOTFS/usr/sbin/policy-rc.d"
rm -rf "${ROOTFS:?}/var/lib/apt/lists/"* "$ROOTFS/var/cache/apt/"*.bin \
  "$ROOTFS/var/cache/apt/archives/"*.deb "$ROOTFS/var/cache/debconf/"*-old \
  "$ROOTFS/var/log/"* "$ROOTFS/tmp/"* "$ROOTFS/var/tmp/"* "$ROOTFS/root/".bash_history \
  "${ROOTFS:?}/dev/"*
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
