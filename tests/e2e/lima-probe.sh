#!/usr/bin/env bash
# The readiness probe of lima/agt.yaml, run as Lima runs it (bash, PARAM_AgtdSocket set),
# in a private mount namespace whose /run is an empty tmpfs: no agtd answers there.
#   - the boot scripts (provisioning) ended over a minute ago: the probe fails at once,
#     saying so, so that limactl reports a failed provisioning within minutes instead of
#     waiting for its whole --timeout;
#   - they are still running, or ended just now: the probe keeps waiting for agtd.
# Needs root (a mount namespace).
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"

[ "$(id -u)" = 0 ] || bail "needs root (unshare --mount)"
T=$(mktemp -d /tmp/agt-lima-probe.XXXXXX) || bail "mktemp"
trap 'rm -rf "$T"' EXIT
# The block scalar `script: |` of the first probe, its 4-space indent removed.
awk '/^probes:/ { p = 1 } p && /^  script: \|/ { s = 1; next }
  s && /^(    |$)/ { sub(/^    /, ""); print; next } s { exit }' "$SRCDIR/lima/agt.yaml" >"$T/probe"
grep -q 'agtd ctl --socket' "$T/probe" || bail "cannot read the probe of lima/agt.yaml"

# probe_in SETUP SECONDS: run SETUP then the probe in the namespace, killed after SECONDS
# (status 137).
probe_in() {
  # a pid namespace too: whatever the probe started dies with it when the time is up
  run timeout -s KILL "$2" unshare --mount --pid --fork --kill-child --propagation private bash -c '
    mount -t tmpfs tmpfs /run || exit 99
    '"$1"'
    PARAM_AgtdSocket=/run/agt/agtd.sock exec bash "$0"' "$T/probe"
}

probe_in 'touch -d "-2 minutes" /run/lima-boot-done' 30
is "provisioning ended 2 minutes ago, no agtd: the probe fails at once" "$RC" 1
like "it says why" "$ERR" "agtd does not answer on /run/agt/agtd.sock, and the provisioning ended over a minute ago"

probe_in 'touch /run/lima-boot-done' 5
is "provisioning ended just now: the probe still waits for agtd" "$RC" 137

probe_in ':' 5
is "provisioning still running: the probe waits for agtd" "$RC" 137

echo "1..$N"
[ "$FAILED" -eq 0 ]
