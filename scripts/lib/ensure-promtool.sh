#!/usr/bin/env bash
# Make sure promtool is installed: the worker's metrics test checks /metrics with `promtool check metrics`
# (apps/worker/test/metrics.test.ts; PROMTOOL_PATH overrides). Debian ships it in its `prometheus` package;
# the Prometheus server that comes with it is not started here (no service is enabled in a container, and
# nothing of ours uses it). Idempotent; prints nothing unless it installs.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ -x "${PROMTOOL_PATH:-/usr/bin/promtool}" ] || apt_install --no-install-recommends prometheus
