# Sourced by the process-level test scripts (one scenario per CTest test):
# WORK, a temporary directory removed at exit, and the checks they share.
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# expect_in TEXT FILE: FILE has a line matching TEXT (a grep pattern), or the test fails showing FILE.
expect_in() { grep -q -- "$1" "$2" || { echo "--- output:"; cat "$2"; fail "expected '$1'"; }; }
