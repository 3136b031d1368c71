#!/usr/bin/env bash
# Make sure Debian's headless-capable Chromium is installed: the conversation page's test drives it
# (apps/api/test/conversation-page.test.ts, through puppeteer-core; CHROMIUM_PATH overrides).
# Idempotent; prints nothing unless it installs.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || apt_install chromium
