#!/usr/bin/env bash
# agt completion bash|zsh|fish and agt.1: the scripts, loaded in their own shells, complete
# commands, subcommands and options as agt's --help lists them; the man page, generated from
# the same --help, holds every command and renders without a groff warning.
set -u
: "${AGT:?AGT must name the agt binary (meson sets it)}"
: "${AGT_MAN:?AGT_MAN must name the generated agt.1 (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
. "$SRCDIR/tests/e2e/tap.sh"
T=$(mktemp -d /tmp/agt-completion.XXXXXX)
trap 'rm -rf "$T"; echo "1..$N"; [ "$FAILED" -eq 0 ]' EXIT
export AGT_TARGET=local AGT_CONFIG=/dev/null
for p in zsh fish groff; do command -v "$p" >/dev/null || bail "missing $p (./dev deps installs it)"; done
mkdir -p "$T/bin"
ln -s "$AGT" "$T/bin/agt"
export PATH=$T/bin:$PATH

# bash: COMPREPLY for a command line, the cursor at its end
complete_bash() {
  bash -c 'eval "$(agt completion bash)"; COMP_WORDS=($1); [ "${1: -1}" = " " ] && COMP_WORDS+=("");
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _agt; printf "%s\n" "${COMPREPLY[@]}"' _ "$1"
}
like "bash: agt ja<TAB> gives jail" "$(complete_bash 'agt ja')" '^jail$'
is "bash: agt jail lo<TAB> gives logs only" "$(complete_bash 'agt jail lo')" logs
like "bash: agt jail logs --fo<TAB> gives --follow" "$(complete_bash 'agt jail logs --fo')" '^--follow$'
like "bash: agt jail run --det<TAB> gives --detach and --detach-keys" \
  "$(complete_bash 'agt jail run --det' | tr '\n' ' ')" '^--detach --detach-keys $'
like "bash: the options of agt up" "$(complete_bash 'agt up --')" '^--timeout$'
like "bash: agt completion's own" "$(complete_bash 'agt c')" '^completion$'
is "bash: after an operand, no command names (files)" \
  "$(cd "$T" && touch zz-file && complete_bash 'agt jail logs somejail zz')" zz-file

# zsh, through bashcompinit
out=$(zsh -c 'eval "$(agt completion zsh)"; COMP_WORDS=(agt jail lo); COMP_CWORD=2; _agt; print -l $COMPREPLY' 2>&1)
# (zsh filters the words by what is typed itself: the function offers the subcommands)
like "zsh: the script loads, and agt jail <TAB> offers logs" "$out" '^logs$'
unlike "without an error" "$out" 'not found|error'
out=$(zsh -c 'eval "$(agt completion zsh)"; COMP_WORDS=(agt jail logs --); COMP_CWORD=3; _agt; print -l -- $COMPREPLY' 2>&1)
like "zsh: agt jail logs --<TAB> offers its options" "$out" '^--follow$'


# fish: the function, with the command line given to commandline
out=$(fish -c 'agt completion fish | source; function commandline; if contains -- -ct $argv; echo --fol; else; printf "%s\n" agt jail logs; end; end; __agt_complete' 2>&1)
like "fish: agt jail logs --fol gives --follow with its help" "$out" $'^--follow\t'
out=$(fish -c 'agt completion fish | source; function commandline; if contains -- -ct $argv; echo; else; printf "%s\n" agt jail; end; end; __agt_complete' 2>&1)
like "fish: agt jail <TAB> lists the subcommands with their help" "$out" $'^prune\tremove every jail that has exited$'

run agt completion tcsh
is "another shell: a usage error" "$RC" 2

# the man page
check "agt.1 was generated" test -s "$AGT_MAN"
for c in up down stop delete jail rootfs verify doctor completion; do
  grep -q "^\.SS \"agt $c\"$" "$AGT_MAN" || not_ok "agt.1 has no section for agt $c"
done
ok "agt.1 has a section for each command"
check "and for subcommands (agt jail run)" grep -q '^\.SS "agt jail run"$' "$AGT_MAN"
check "with the options of its --help (--detach-keys)" grep -q -- '--detach-keys' "$AGT_MAN"
warnings=$(groff -man -Tutf8 -ww -z "$AGT_MAN" 2>&1)
is "groff renders it without a warning" "$warnings" ""
