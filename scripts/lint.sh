#!/usr/bin/env bash
# lint.sh [SOURCE_ROOT]: the house style, checked (just lint; the unit suite runs it too).
#   1. every C file as .clang-format says (clang-format --dry-run --Werror);
#   2. every shell script parses (bash -n).
# Files are what git tracks or would track; outside a git checkout, what find sees.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
files() { # PATTERN...: NUL-separated
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard -- "$@"
  else
    local args=() p
    for p in "$@"; do args+=(-o -name "$p"); done
    find . -path ./build\* -prune -o \( -false "${args[@]}" \) -type f -print0
  fi
}
command -v clang-format >/dev/null || { echo "lint: clang-format is missing (./dev deps)" >&2; exit 1; }
files '*.c' '*.h' | xargs -0 -r clang-format --dry-run --Werror
{ printf '%s\0' dev .ci/run; files '*.sh'; } | xargs -0 -r -n 1 bash -n
echo "lint: C formatted, shell scripts parse"
