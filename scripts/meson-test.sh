#!/usr/bin/env bash
# meson-test.sh BUILD_DIR [MESON_TEST_ARGS...]
# Runs `meson test` in BUILD_DIR, then prints one summary line counted from its test log:
#   meson: N passed, N failed, N skipped
# and exits with meson's own status.
set -euo pipefail

builddir="${1:?usage: meson-test.sh BUILD_DIR [MESON_TEST_ARGS...]}"
shift
log="$builddir/meson-logs/testlog.json"
rm -f "$log"

status=0
meson test -C "$builddir" --print-errorlogs "$@" || status=$?

python3 - "$log" <<'PY'
import json, sys
passed = failed = skipped = 0
try:
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line).get("result", "")
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
except FileNotFoundError:
    pass
print(f"meson: {passed} passed, {failed} failed, {skipped} skipped")
PY

exit "$status"
