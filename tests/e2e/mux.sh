#!/usr/bin/env bash
# agt's connection keeper (host/mux.h) against the stand-in's VM (a real sshd, a real agtd):
# the first command starts it, the next ones reuse its one SSH connection, its socket is
# private, it ends after ssh.persist idle, when its socket is removed and when the VM's
# sshd goes away (the next command then makes a new one and says so); ssh.persist: 0
# turns it off; a directory others can reach is refused.  A command through the keeper does
# not load libssh (where agt loads it at its first SSH connection: Linux).
#
# Needs root and Linux, ss.  A missing prerequisite is a failure.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec </dev/null
command -v ss >/dev/null || bail "ss is needed (apt-get install iproute2)"

KDIR=$XDG_RUNTIME_DIR/agt
e2e_vm_up
PORT=$(lima_field "$VM" sshLocalPort)
[ -n "$PORT" ] || bail "no SSH port for the VM"

conns() { # established client connections to the VM's sshd
  ss -Htn state established "( dport = :$PORT )" | wc -l
}
keeper_socks() { find "$KDIR" -name '*.sock' 2>/dev/null; }
keeper_pid() { # the pid listening on the keeper's socket
  ss -Hxlp "src = $1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1
}
gone() { ! kill -0 "$1" 2>/dev/null; }

run agt jail ls
is "agt jail ls through a new keeper exits 0" "$RC" 0
SOCK=$(keeper_socks)
is "one keeper socket" "$(printf '%s\n' "$SOCK" | grep -c .)" 1
is "its directory is 0700" "$(stat -c %a "$KDIR")" 700
is "its socket is 0600" "$(stat -c %a "$SOCK")" 600
KPID=$(keeper_pid "$SOCK")
check "a process listens on it" test -n "$KPID"
is "the keeper has no terminal" "$(ps -o tty= -p "$KPID" | tr -d ' ')" "?"
is "the keeper holds one SSH connection" "$(conns)" 1

for i in 1 2 3 4 5; do
  run agt jail ls
  [ "$RC" = 0 ] || break
done
is "five more commands exit 0" "$RC" 0
is "they went through the same keeper" "$(keeper_pid "$SOCK")" "$KPID"
is "still one SSH connection" "$(conns)" 1
unlike "no note about connecting again" "$ERR" "connecting again"

# libssh is the keeper's: a command through it does not load it (host/ssh.c), where agt was
# built to load it at its first SSH connection (Linux)
DLOPEN=1
ldd "$AGT" | grep -q libssh && DLOPEN=
if [ -z "$DLOPEN" ]; then
  ok "the keeper has libssh loaded # SKIP agt links libssh (meson option libssh_dlopen off)"
  ok "a command through the keeper does not load libssh # SKIP (the same)"
else
  check "the keeper has libssh loaded" grep -q libssh "/proc/$KPID/maps"
  run env LD_DEBUG=files "$AGT" jail ls
  unlike "a command through the keeper does not load libssh" "$ERR" "file=libssh"
fi

# streams take a connection each: exec opens channels on the kept connection too
run agt jail ls --json
is "a listing in JSON through the keeper" "$RC" 0

# removing the socket ends the keeper
rm -f "$SOCK"
check "the keeper ends when its socket is removed" wait_until 5 gone "$KPID"
no_conns() { test "$(conns)" = 0; }
check "and its SSH connection is closed" wait_until 5 no_conns

# the VM's sshd goes away under a keeper: the next command connects again, and says so
run agt jail ls
SOCK=$(keeper_socks)
KPID=$(keeper_pid "$SOCK")
check "a new keeper" test -n "$KPID"
run agt stop
is "agt stop" "$RC" 0
run agt up
is "agt up again" "$RC" 0
[ "$RC" = 0 ] || printf '%s\n' "$ERR" | tail -5 | sed 's/^/# /'
like "it says the kept connection had dropped" "$ERR" "the ssh connection to .* dropped: .*\(the kept connection\); connecting again"
PORT=$(lima_field "$VM" sshLocalPort) # a new boot, a new port
run agt jail ls
is "agt jail ls after the VM restarted" "$RC" 0
check "the old keeper is gone" wait_until 5 gone "$KPID"
NEW=$(keeper_pid "$(keeper_socks)")
check "a new keeper serves" test -n "$NEW" -a "$NEW" != "$KPID"
is "one SSH connection" "$(conns)" 1

# ssh.persist: idle time, then the keeper ends; 0: no keeper
sed -i 's/^ssh:$/ssh:\n  persist: 2s/' "$AGT_CONFIG"
rm -f "$(keeper_socks)"
wait_until 5 gone "$NEW"
run agt jail ls
SOCK=$(keeper_socks)
KPID=$(keeper_pid "$SOCK")
check "ssh.persist 2s: a keeper" test -n "$KPID"
check "it ends after 2 s without a channel" wait_until 6 gone "$KPID"
check "and removes its socket" test ! -e "$SOCK"
sed -i 's/^  persist: 2s$/  persist: 0/' "$AGT_CONFIG"
run env LD_DEBUG=files "$AGT" jail ls
is "ssh.persist 0: agt jail ls exits 0" "$RC" 0
if [ -z "$DLOPEN" ]; then
  ok "ssh.persist 0: agt loads libssh itself # SKIP agt links libssh"
else
  like "ssh.persist 0: agt loads libssh itself" "$ERR" "file=libssh[^ ]* .*dynamically loaded by"
fi
is "ssh.persist 0: no keeper" "$(keeper_socks)" ""
is "ssh.persist 0: no connection left open" "$(conns)" 0
sed -i '/^  persist: 0$/d' "$AGT_CONFIG"

# a keeper directory that others can reach is refused
mkdir -m 755 "$T/open-run" "$T/open-run/agt"
run env XDG_RUNTIME_DIR="$T/open-run" "$AGT" jail ls
check "a keeper directory of mode 0755: refused" test "$RC" -ne 0
like "and the error says why and what to do" "$ERR" "only you can reach \(mode 0700\).*ssh.persist: 0"
