# shellcheck shell=bash disable=SC2034  # sourced: the tests use what it sets
# TAP output and small helpers for the e2e tests (lib.sh, doctor.sh, verify.sh source it).
# run needs $T, the test's private directory, by the time it is called.
N=0
FAILED=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
not_ok() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
bail() { echo "Bail out! $*"; exit 1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
is() {
  if [ "$2" = "$3" ]; then ok "$1"; else
    not_ok "$1"; echo "#   got:  '$2'"; echo "#   want: '$3'"
  fi
}
like() {
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then ok "$1"; else
    not_ok "$1"; printf '%s\n' "$2" | head -40 | sed 's/^/#   got: /'; echo "#   want match: $3"
  fi
}
unlike() {
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then
    not_ok "$1"; printf '%s\n' "$2" | grep -E -- "$3" | head -20 | sed 's/^/#   got: /'
    echo "#   want no match: $3"
  else ok "$1"; fi
}
# run CMD...: sets OUT (stdout), ERR (stderr) and RC
run() {
  OUT=$("$@" 2>"$T/stderr")
  RC=$?
  ERR=$(cat "$T/stderr")
}
# wait_until SECONDS COMMAND...: poll every 0.1 s until COMMAND succeeds.
wait_until() {
  local n=$(($1 * 10))
  shift
  for _ in $(seq 1 "$n"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
