#!/usr/bin/env bash
# Make sure everything tern needs locally is in place: Postgres, Redis, a
# Docker engine and the sandbox image (in that order). Quiet when it all is.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

bash "$HERE/ensure-postgres.sh"
bash "$HERE/ensure-redis.sh"
bash "$HERE/ensure-docker.sh"
bash "$HERE/ensure-sandbox-image.sh"
