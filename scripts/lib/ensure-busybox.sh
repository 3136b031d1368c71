#!/usr/bin/env bash
# Make sure Debian's static busybox is at /bin/busybox: the any-image test makes a scratch image of it
# alone, an image with no shell or libc of its own (packages/agent/test/any-image.test.ts). From
# Debian's busybox-static package, as the machine's apt sources give it. Idempotent; prints nothing
# unless it installs.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ -x /bin/busybox ] || apt_install --no-install-recommends busybox-static
