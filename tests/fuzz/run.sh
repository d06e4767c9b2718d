#!/usr/bin/env bash
# run.sh BUILD_DIR SECONDS [TARGET...]
# Runs each libFuzzer target of BUILD_DIR (configured with -Dfuzz=true) for SECONDS, one after
# the other, on BUILD_DIR/corpus/TARGET: a working corpus seeded from tests/fuzz/corpus/ and
# tests/fuzz/regressions/, so the tree is not written to.  Crashes go to
# BUILD_DIR/fuzz-artifacts/TARGET/, logs to BUILD_DIR/fuzz-logs/.  Prints one line per target:
#   fuzz-proto: 61s, 1234567 execs (20238/s), cov 171, corpus 412 inputs, ok
# and exits 1 when any target found a crash.
set -euo pipefail

builddir="${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}"
seconds="${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}"
shift 2
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(proto yaml manifest)

declare -A dicts=([proto]=proto.dict [yaml]=yaml.dict [manifest]=yaml.dict)
summary=()
status=0
mkdir -p "$builddir/fuzz-logs"
for t in "${targets[@]}"; do
  exe="$builddir/tests/fuzz/fuzz-$t"
  if [ ! -x "$exe" ]; then
    summary+=("fuzz-$t: not built (is $builddir configured with -Dfuzz=true?)")
    status=1
    continue
  fi
  corpus="$builddir/corpus/$t"
  artifacts="$builddir/fuzz-artifacts/$t"
  log="$builddir/fuzz-logs/fuzz-$t.log"
  mkdir -p "$corpus" "$artifacts"
  for d in "$src/corpus/$t" "$src/regressions/$t"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name '.*' -exec cp -n -t "$corpus" {} +
  done
  echo "fuzz-$t: ${seconds}s on $corpus (log: $log)"
  start=$SECONDS
  r=0
  "$exe" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -dict="$src/${dicts[$t]}" -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || r=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  n=$(find "$corpus" -type f | wc -l)
  if [ "$r" -eq 0 ]; then
    result=ok
  else
    status=1
    crash=$(grep -o "Test unit written to .*" "$log" | tail -1 | sed 's/Test unit written to //')
    result="FAILED (exit $r${crash:+, input: $crash}; see $log)"
  fi
  summary+=("fuzz-$t: $((SECONDS - start))s, ${execs:-?} execs (${rate:-?}/s), cov ${cov:-?}, corpus $n inputs, $result")
done
echo
printf '%s\n' "${summary[@]}"
exit "$status"
