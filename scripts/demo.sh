#!/usr/bin/env bash
# demo.sh: the first thing to run. Starts a private agtd, builds the default rootfs, runs
# four jails at once (each with its own workspace), shows them, prints their logs and
# removes them. Run it as root through `./dev demo` (which installs and builds first).
#
# Environment:
#   AGTD               the agtd binary (default: build/guest/agtd)
#   AGT_DEMO_JAILS     how many jails to run at once (default: 4)
#   AGT_DEMO_MANIFEST  the rootfs manifest (default: rootfs/default.yaml)
#   AGT_DEMO_KEEP=1    keep the demo directory (socket, state, logs) after a successful run
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
AGTD="${AGTD:-$ROOT/build/guest/agtd}"
MANIFEST="${AGT_DEMO_MANIFEST:-$ROOT/rootfs/default.yaml}"
NJAILS="${AGT_DEMO_JAILS:-4}"

step() { printf '\n==> %s\n' "$*"; }
die() {
  printf 'demo: error: %s\n' "$*" >&2
  exit 1
}

[[ $EUID -eq 0 ]] || die "run as root: jails need namespaces and mounts (try: sudo ./dev demo)"
[[ -x $AGTD ]] || die "$AGTD not found: build it first (just build, or ./dev demo)"
[[ -f $MANIFEST ]] || die "$MANIFEST not found"

# Everything the demo makes lives here: the daemon's socket, state and log, and the
# jails' workspaces.
DEMO_DIR="$(mktemp -d /tmp/agt-demo.XXXXXX)"
chmod 755 "$DEMO_DIR"
SOCK="$DEMO_DIR/agtd.sock"
STATE="$DEMO_DIR/state"
LOG="$DEMO_DIR/agtd.log"
mkdir -p "$STATE" "$DEMO_DIR/work"

AGTD_PID=
JAILS=()
OK=0

ctl() { "$AGTD" ctl --socket "$SOCK" "$@"; }

cleanup() {
  set +e
  if [[ -n $AGTD_PID ]] && kill -0 "$AGTD_PID" 2>/dev/null; then
    if [[ $OK -ne 1 ]]; then
      # Interrupted or failed half-way: take down the jails this demo started.
      for name in "${JAILS[@]}"; do
        ctl jail stop "$name" >/dev/null 2>&1
        ctl jail rm "$name" >/dev/null 2>&1
      done
    fi
    step "stopping agtd (pid $AGTD_PID)"
    kill -TERM "$AGTD_PID" 2>/dev/null
    for _ in $(seq 50); do
      kill -0 "$AGTD_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$AGTD_PID" 2>/dev/null; then
      echo "agtd did not stop within 5 s; killing it"
      kill -KILL "$AGTD_PID" 2>/dev/null
    fi
    wait "$AGTD_PID" 2>/dev/null
  fi

  if [[ $OK -ne 1 ]]; then
    if [[ -f $LOG ]]; then
      echo "--- last lines of $LOG ---"
      tail -n 30 "$LOG"
    fi
    echo "demo failed; its files are kept in $DEMO_DIR"
  elif [[ ${AGT_DEMO_KEEP:-0} == 1 ]]; then
    echo "demo files kept in $DEMO_DIR"
  elif ! findmnt -rn -o TARGET >"$DEMO_DIR/.mounts" || grep -qF "$DEMO_DIR/" "$DEMO_DIR/.mounts"; then
    echo "something is still mounted under $DEMO_DIR; leaving it in place"
  else
    rm -rf --one-file-system "$DEMO_DIR"
  fi
  if [[ $OK -eq 1 ]]; then
    step "demo done: $NJAILS jails ran at once on one rootfs, each in its own workspace"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting agtd: socket $SOCK, state $STATE"
"$AGTD" serve --socket "$SOCK" --state-dir "$STATE" --workspace-root "$DEMO_DIR/work" --cgroup "agt-demo-$$" </dev/null >"$LOG" 2>&1 &
AGTD_PID=$!

# Ready when it answers a hello; give up after 10 s.
ready=0
for _ in $(seq 100); do
  kill -0 "$AGTD_PID" 2>/dev/null || die "agtd exited during start-up"
  if ctl hello >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.1
done
[[ $ready -eq 1 ]] || die "agtd did not answer hello within 10 s"
ctl hello

step "building the rootfs from ${MANIFEST#"$ROOT"/}"
ctl rootfs build "$MANIFEST"
ctl rootfs ls

step "running $NJAILS jails at once, each with its own workspace at /work"
for i in $(seq "$NJAILS"); do
  name="demo-$i"
  ws="$DEMO_DIR/work/$name"
  mkdir -p "$ws"
  echo "this is $name's workspace" >"$ws/README"
  touch "$ws/file-of-$name"
  JAILS+=("$name")
  # Single quotes: $(hostname) runs inside the jail.
  # shellcheck disable=SC2016
  ctl jail run --name "$name" --workspace "$ws" -- \
    /bin/sh -c 'echo hello from $(hostname); ls /work; sleep 2'
done

step "jail ls (all $NJAILS running side by side)"
ctl jail ls

step "waiting for the jails to exit (each sleeps 2 s)"
# A jail is still going while `jail inspect` reports it running (or not yet started).
still_running() {
  ctl jail inspect "$1" 2>/dev/null |
    grep -Eiq '"?state"?[[:space:]]*[:=][[:space:]]*"?(running|starting|creating|created)'
}
for _ in $(seq 300); do
  running=0
  for name in "${JAILS[@]}"; do
    if still_running "$name"; then
      running=$((running + 1))
    fi
  done
  [[ $running -eq 0 ]] && break
  sleep 0.1
done
[[ $running -eq 0 ]] || die "$running jail(s) still running after 30 s"
ctl jail ls

for name in "${JAILS[@]}"; do
  step "logs of $name"
  ctl jail logs "$name"
done

step "removing the jails"
for name in "${JAILS[@]}"; do
  ctl jail rm "$name"
done
ctl jail ls

OK=1 # cleanup (on exit) stops agtd and says the demo is done
