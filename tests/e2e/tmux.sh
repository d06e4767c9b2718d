# shellcheck shell=bash disable=SC2034  # sourced: the tests use what it sets
# A real terminal for the e2e tests (jail.sh, exec.sh): a private tmux server, its screens,
# and a wait for a line on one.  Source it after tap.sh, with $T set; tmux_server NAME
# sets $TM.
#
# A pane runs its command with the shell tmux takes from $SHELL. A ctrl-c that agt does not
# read as a byte (stdin not a terminal) is a SIGINT to the pane's whole foreground process
# group: dash, where SHELL is unset or /bin/sh, then dies after agt exits, as it would not in
# a user's interactive shell. bash waits for agt and goes on when agt exits normally.
tmux_server() { # NAME
  export TMUX_TMPDIR=$T
  TM="env SHELL=/bin/bash tmux -L $1"
}
screen() { $TM capture-pane -p -t "$1" | grep -v '^$'; }
shows() { screen "$1" | grep -Eq -- "$2"; }
wait_for() { # SESSION REGEX; on a failure the screen, for the log
  wait_until 15 shows "$1" "$2" && return 0
  screen "$1" | sed 's/^/#   screen: /'
  return 1
}
