#!/usr/bin/env bash
# Every relay delivers every byte: the egress proxy (CONNECT and plain HTTP), jail.port with
# `agtd ctl jail port`, and exec and follow streams.  Transfers of a known pattern (probe
# xfer, tests/guest/xfer.c) at sizes around the relays' buffer and queue limits (64 KiB,
# 1 MiB) and 64 MiB; the server closes first, the client half-closes, readers are slow, the
# server resets mid-transfer (the client must see the reset); each checked by length and
# hash, and the proxy's log checked against what was delivered.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || bail "python3 is needed for the stream client"
agtd_start
build_test_rootfs
R=$TEST_ROOTFS

SIZES="0 1 65535 65537 1048575 1048577 4194305 67108864"
MODES="down half echo up"
NXFER=$(($(wc -w <<<"$SIZES") * $(wc -w <<<"$MODES")))
M64=67108864

"$PROBE" xfer serve 0 >"$T/xfer.out" 2>&1 &
SRV_PID=$!
for _ in $(seq 1 100); do grep -q serving "$T/xfer.out" && break; sleep 0.05; done
PORT=$(sed -n 's/^serving on 127.0.0.1:\([0-9]*\)$/\1/p' "$T/xfer.out")
[ -n "$PORT" ] || bail "the transfer server did not start: $(cat "$T/xfer.out")"
trap 'rc=$?; kill "$SRV_PID" 2>/dev/null; (exit $rc); finish' EXIT

# the fails of a list of transfer results, for the TAP diagnostics
fails() { printf '%s\n' "$1" | grep -v '^ok ' | head -5 | sed 's/^/#   /'; }

# agtd's peak resident memory since the last reset, in KiB
hwm_reset() { echo 5 >"/proc/$AGTD_PID/clear_refs"; }
hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$AGTD_PID/status"; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$AGTD_PID/status"; }

# --- the egress proxy: the jail reaches the server on the guest's loopback through it
for via in connect http; do
  ctl jail run --name "e-$via" --rootfs "$R" --allow "127.0.0.1:$PORT" -- /bin/sh -c "
    for m in $MODES; do for n in $SIZES; do
      probe xfer get \$m \$n 127.0.0.1 $PORT 3128 $via
    done; done" >/dev/null || not_ok "run e-$via"
  ctl jail wait "e-$via" >/dev/null
  out=$(ctl jail logs "e-$via")
  is "proxy ($via): $NXFER transfers, each complete and intact" "$(grep -c '^ok ' <<<"$out")" "$NXFER"
  fails "$out"
  # what the log says went each way, against what the client got
  net=$(ctl jail net "e-$via" | sed -n 's/^closed .* up \([0-9]*\) down \([0-9]*\).*/\2/p' | sort -n)
  want=$(for m in $MODES; do for n in $SIZES; do
    if [ "$m" = up ]; then echo $((19 + $(printf 'ok up %s hash=%016x\n' "$n" 0 | wc -c))); else echo $((19 + n)); fi
  done; done | sort -n)
  is "proxy ($via): the log's bytes_down are the bytes delivered" "$net" "$want"
  up=$(ctl jail net "e-$via" | sed -n 's/^closed .* up \([0-9]*\) down.*/\1/p' | sort -n | tail -1)
  check "proxy ($via): bytes_up counts the 64 MiB sent" test "$up" -gt "$M64"
done

# a server that resets mid-transfer: the client sees the reset, not a clean end of a short
# body (4 MiB, read slowly so that most of it is still on its way when the reset comes)
for via in connect http; do
  ctl jail run --name "e-reset-$via" --rootfs "$R" --allow "127.0.0.1:$PORT" -- /bin/sh -c "
    probe xfer get reset 1 127.0.0.1 $PORT 3128 $via
    probe xfer get reset 4194304 127.0.0.1 $PORT 3128 $via 1000" >/dev/null
  ctl jail wait "e-reset-$via" >/dev/null
  out=$(ctl jail logs "e-reset-$via")
  is "proxy ($via): a server's reset reaches the client as a reset, twice" "$(grep -c '^ok reset ' <<<"$out")" 2
  fails "$out"
done

# a slow reader (8 MiB) and a slow server (16 MiB sent to it as fast as the client can):
# every byte, and agtd does not hold the backlog
hwm_reset
base=$(rss)
ctl jail run --name e-slow --rootfs "$R" --allow "127.0.0.1:$PORT" -- /bin/sh -c "
  probe xfer get down 8388608 127.0.0.1 $PORT 3128 connect 1000
  probe xfer get up 16777216 127.0.0.1 $PORT 3128 http 1000" >/dev/null
ctl jail wait e-slow >/dev/null
out=$(ctl jail logs e-slow)
is "proxy: a slow reader and a slow server get all of it" "$(grep -c '^ok ' <<<"$out")" 2
fails "$out"
grow=$(($(hwm) - base))
check "proxy: agtd's memory grew by $grow KiB for them (< 4 MiB)" test "$grow" -lt 4096

# --- jail.port through agtd ctl jail port: the server in the jail, the client here
ctl jail run --name p1 --rootfs "$R" -- probe xfer serve 8080 >/dev/null || not_ok "run p1"
for _ in $(seq 1 100); do ctl jail logs p1 2>/dev/null | grep -q serving && break; sleep 0.05; done
ctl jail port p1 8080 0 >"$T/port.out" 2>"$T/port.err" &
PORTER=$!
for _ in $(seq 1 100); do grep -q forwarding "$T/port.out" && break; sleep 0.05; done
LPORT=$(sed -n 's/^forwarding 127.0.0.1:\([0-9]*\) .*/\1/p' "$T/port.out")
[ -n "$LPORT" ] || bail "agtd ctl jail port did not start: $(cat "$T/port.err")"
out=$(for m in $MODES; do for n in $SIZES; do "$PROBE" xfer get "$m" "$n" 127.0.0.1 "$LPORT"; done; done)
is "jail port: $NXFER transfers, each complete and intact" "$(grep -c '^ok ' <<<"$out")" "$NXFER"
fails "$out"
hwm_reset
base=$(rss)
out=$("$PROBE" xfer get down 8388608 127.0.0.1 "$LPORT" 1000; "$PROBE" xfer get up 16777216 127.0.0.1 "$LPORT" 1000)
is "jail port: a slow reader and a slow server get all of it" "$(grep -c '^ok ' <<<"$out")" 2
fails "$out"
grow=$(($(hwm) - base))
check "jail port: agtd's memory grew by $grow KiB for them (< 4 MiB)" test "$grow" -lt 4096
kill "$PORTER"
wait "$PORTER"

# --- exec and follow streams: 64 MiB of output, a slow reader, a client that half-closes
out=$(ctl jail exec p1 -- probe xfer gen $M64 | "$PROBE" xfer check $M64)
like "exec: 64 MiB of output, intact" "$out" "^ok stream $M64 hash="
out=$(ctl jail exec p1 -- probe xfer gen 4194305 | "$PROBE" xfer check 4194305 1000)
like "exec: a slow reader gets all of it" "$out" "^ok stream 4194305 hash="
want=$("$PROBE" xfer gen 4194305 | sha256sum | cut -d' ' -f1)
got=$(python3 "$SRCDIR/tests/guest/halfclose.py" "$SOCK" p1 probe xfer gen 4194305)
is "exec: a client that half-closes after the request gets all the output and the exit" \
  "$got" "4194305 $want exit=0"
ctl jail create --name f1 --rootfs "$R" -- probe xfer gen $M64 >/dev/null
ctl jail logs f1 -f >"$T/follow.out" 2>"$T/follow.err" &
FOLLOWER=$!
sleep 0.5
ctl jail start f1 >/dev/null
wait "$FOLLOWER"
like "logs -f: 64 MiB of output, intact" "$("$PROBE" xfer check $M64 <"$T/follow.out")" "^ok stream $M64 hash="

ctl jail rm p1 --force >/dev/null
