#!/usr/bin/env bash
# Make sure the sandbox image ${SANDBOX_IMAGE:-tern-sandbox:latest} exists.
#
# The recipe (docker/sandbox/Dockerfile + docker/sandbox/build-offline.sh) is
# hashed; the image built from it is tagged tern-sandbox:<hash> and
# $SANDBOX_IMAGE. Changing either file makes the next run rebuild.
#
# Build method: offline (debootstrap + docker import, the default) or, with
# TERN_SANDBOX_BUILD=dockerfile, `docker build` (needs a registry).
# A SANDBOX_IMAGE that is not a tern-sandbox: tag is used as it is.
# TERN_IMAGE_FROM=<DOCKER_HOST of another engine>: an image that engine has is
# copied from it (docker save | docker load) instead of being built again.
#
# Idempotent; prints nothing (to stderr, prefixed [tern]) unless it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RECIPE="$ROOT/docker/sandbox"
IMAGE="${SANDBOX_IMAGE:-tern-sandbox:latest}"
METHOD="${TERN_SANDBOX_BUILD:-offline}"

have docker || die "docker is missing (run scripts/lib/ensure-docker.sh)"
image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null; }

# Copies image $1 from the engine at TERN_IMAGE_FROM, when set and that engine has it.
copy_image() {
  [ -n "${TERN_IMAGE_FROM:-}" ] || return 1
  DOCKER_HOST="$TERN_IMAGE_FROM" docker image inspect "$1" >/dev/null 2>&1 || return 1
  log "copying $1 from $TERN_IMAGE_FROM (docker save | docker load)"
  DOCKER_HOST="$TERN_IMAGE_FROM" docker save "$1" | docker load -q >/dev/null ||
    die "could not copy $1 from $TERN_IMAGE_FROM"
}

case "$IMAGE" in
  tern-sandbox:*) ;;
  *)
    image_id "$IMAGE" >/dev/null && exit 0
    copy_image "$IMAGE" && exit 0
    die "SANDBOX_IMAGE=$IMAGE does not exist on this Docker engine; pull or build it, or unset SANDBOX_IMAGE to use tern-sandbox:latest"
    ;;
esac

HASH="$(cat "$RECIPE/Dockerfile" "$RECIPE/build-offline.sh" | sha256sum | cut -c1-12)"
HASH_TAG="tern-sandbox:$HASH"

# Tag $IMAGE to the recipe's image; quiet when it already is.
tag_image() {
  local want have_id
  want="$(image_id "$HASH_TAG")" || return 1
  have_id="$(image_id "$IMAGE" || true)"
  if [ "$want" != "$have_id" ]; then
    log "tagging $HASH_TAG as $IMAGE"
    docker tag "$HASH_TAG" "$IMAGE"
  fi
}

tag_image && exit 0

# One build at a time per machine; whoever waited finds the image built.
LOCK_DIR="${TERN_CACHE_DIR:-/var/cache/tern}"
mkdir -p "$LOCK_DIR" 2>/dev/null || LOCK_DIR="${TMPDIR:-/tmp}"
exec 9>"$LOCK_DIR/sandbox-image.lock"
if ! flock -n 9; then
  log "another sandbox image build is running; waiting for it"
  flock 9
fi
tag_image && exit 0
copy_image "$HASH_TAG" && tag_image && exit 0

start=$(date +%s)
case "$METHOD" in
  dockerfile)
    log "building $HASH_TAG with docker build ($RECIPE/Dockerfile)"
    docker build -q -t "$HASH_TAG" -f "$RECIPE/Dockerfile" "$RECIPE" >/dev/null
    ;;
  offline)
    [ "$(id -u)" -eq 0 ] ||
      die "building the sandbox image offline needs root (or TERN_SANDBOX_BUILD=dockerfile with a registry)"
    have debootstrap || apt_install debootstrap
    log "building $HASH_TAG offline (debootstrap + docker import; a few minutes)"
    bash "$RECIPE/build-offline.sh" "$HASH_TAG"
    ;;
  *) die "TERN_SANDBOX_BUILD must be offline or dockerfile, not '$METHOD'" ;;
esac

tag_image || die "the build did not produce $HASH_TAG"
size="$(docker image inspect --format '{{.Size}}' "$HASH_TAG")"
log "built $IMAGE ($HASH_TAG, $((size / 1000000)) MB) in $(($(date +%s) - start))s"
