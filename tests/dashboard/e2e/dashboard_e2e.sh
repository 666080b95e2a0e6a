#!/usr/bin/env bash
# The dashboard's browser test (dashboard.e2e.mjs) with its prerequisites
# checked first:
#   dashboard_e2e.sh MICRODDP|--mock|--attach=URL NODE_MODULES SCREENSHOT.png [--ranks N (mock, attach)] [--spki HASH (attach)]
#   dashboard_e2e.sh MICRODDP NODE_MODULES SCREENSHOT.png --auth   (auth.e2e.mjs: the token over HTTPS)
#   dashboard_e2e.sh --mock NODE_MODULES SCREENSHOT.png --membership   (membership.e2e.mjs: shrink, grow, goodput)
# (--attach=URL: the page of a job already running there, e.g. the compose
# lab's; its login URL over HTTPS: dashboard.e2e.mjs says how it is trusted)
# Needs node (20+), Debian's chromium (/usr/bin/chromium, or $CHROMIUM) and
# playwright-core in NODE_MODULES (`npm ci --prefix dashboard`). When one is
# missing the test is skipped (exit 77) locally but fails in CI (CI=true),
# so CI cannot pass without running it.
set -uo pipefail
BIN="$1"
MODULES="$2"
SHOT="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

missing() {
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: $1 (CI=true: the browser test must run; bash scripts/test installs these)"
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
command -v node >/dev/null || missing "node is not installed (apt-get install nodejs)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || missing "node $(node --version) is too old (20+ needed: playwright-core)"
[[ -x "$CHROMIUM" ]] || missing "$CHROMIUM is not installed (apt-get install chromium)"
[[ -f "$MODULES/playwright-core/index.mjs" ]] \
  || missing "$MODULES/playwright-core is missing (run: npm ci --prefix dashboard)"

if [[ "$BIN" == --attach=* ]]; then
  exec node "$HERE/dashboard.e2e.mjs" --attach "${BIN#--attach=}" --node-modules "$MODULES" --chromium "$CHROMIUM" --screenshot "$SHOT" "${@:4}"
fi
if [[ "$BIN" == "--mock" && "${4:-}" == "--membership" ]]; then
  exec node "$HERE/membership.e2e.mjs" --node-modules "$MODULES" --chromium "$CHROMIUM" --screenshot "$SHOT"
fi
if [[ "$BIN" == "--mock" ]]; then
  exec node "$HERE/dashboard.e2e.mjs" --mock --node-modules "$MODULES" --chromium "$CHROMIUM" --screenshot "$SHOT" "${@:4}"
fi
if [[ "${4:-}" == "--auth" ]]; then
  command -v openssl >/dev/null || missing "openssl is not installed (apt-get install openssl)"
  exec node "$HERE/auth.e2e.mjs" --microddp "$BIN" --node-modules "$MODULES" --chromium "$CHROMIUM" --screenshot "$SHOT"
fi
exec node "$HERE/dashboard.e2e.mjs" --microddp "$BIN" --node-modules "$MODULES" --chromium "$CHROMIUM" --screenshot "$SHOT"
