#!/usr/bin/env bash
# The C++ tree is formatted as .clang-format says: every tracked C++ file
# passes `clang-format --dry-run --Werror` (clang-format 14, Debian 12's).
# Fails naming each file and its first differing line; fix with
#   git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.c' | xargs clang-format -i
# Skips (77) outside a git checkout or without clang-format, except in CI.
#   format_test.sh REPO
set -uo pipefail
REPO="$1"
skip() {
  [[ "${CI:-}" == "true" ]] && { echo "FAIL: $1 (CI=true: bash scripts/test installs clang-format)"; exit 1; }
  echo "SKIP: $1"; exit 77
}
command -v clang-format >/dev/null || skip "clang-format is not installed"
git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1 || skip "$REPO is not a git checkout"
mapfile -t files < <(git -C "$REPO" ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.c')
((${#files[@]})) || { echo "FAIL: no C++ files found in $REPO"; exit 1; }
cd "$REPO" || exit 1
if ! out="$(clang-format --dry-run --Werror "${files[@]}" 2>&1)"; then
  echo "$out" | grep -E "^[^ ].*: (error|warning):" | head -n 40
  echo "FAIL: $(echo "$out" | grep -cE "^[^ ].*: (error|warning):") places not formatted as .clang-format says;" \
    "fix with: git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.c' | xargs clang-format -i"
  exit 1
fi
echo "PASS: ${#files[@]} C++ files formatted ($(clang-format --version | head -n1))"
