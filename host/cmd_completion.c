/* agt completion bash|zsh|fish: a completion script for the shell.  The scripts hold no
 * command or option names: at each completion they read them from agt's own --help (agt
 * --help, agt CMD --help, agt CMD SUB --help), which the option tables generate, so they
 * cannot drift from the parser.  They only ever run agt with --help, and only on words that
 * agt's help lists as commands: completing never runs a command. */
#include <stdio.h>
#include <string.h>

#include "agt.h"

/* bash (zsh uses it through bashcompinit) */
static const char bash_script[] =
    "# agt completion for bash: eval \"$(agt completion bash)\" (or save it in\n"
    "# ~/.local/share/bash-completion/completions/agt)\n"
    "_agt_help_commands() { # the names under 'commands:' in a --help\n"
    "  printf '%s\\n' \"$1\" | sed -n '/^commands:/,/^$/{s/^  \\([a-z][a-z-]*\\) .*/\\1/p}'\n"
    "}\n"
    "_agt_help_options() { # the long and short options of a --help\n"
    "  printf '%s\\n' \"$1\" | sed -n 's/^ *\\(-[a-zA-Z], "
    "\\)\\{0,1\\}\\(--[a-z][a-z0-9-]*\\).*/\\2/p'\n"
    "  printf '%s\\n' \"$1\" | sed -n 's/^  \\(-[a-zA-Z]\\), --.*/\\1/p'\n"
    "}\n"
    "_agt() {\n"
    "  [[ -n ${ZSH_VERSION-} ]] && setopt localoptions ksharrays # zsh: arrays from 0, as bash's\n"
    "  local cur=${COMP_WORDS[COMP_CWORD]} agt=${COMP_WORDS[0]} cmdpath=() help next w i\n"
    "  help=$(command \"$agt\" --help 2>/dev/null)\n"
    "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
    "    w=${COMP_WORDS[i]}\n"
    "    [[ $w == -* ]] && continue\n"
    "    _agt_help_commands \"$help\" | grep -qxF -- \"$w\" || break\n"
    "    cmdpath+=(\"$w\")\n"
    "    help=$(command \"$agt\" \"${cmdpath[@]}\" --help 2>/dev/null)\n"
    "  done\n"
    "  if [[ $cur == -* ]]; then\n"
    "    COMPREPLY=($(compgen -W \"$(_agt_help_options \"$help\")\" -- \"$cur\"))\n"
    "    return\n"
    "  fi\n"
    "  next=$(_agt_help_commands \"$help\")\n"
    "  if [[ -n $next && $i -eq $COMP_CWORD ]]; then\n"
    "    COMPREPLY=($(compgen -W \"$next\" -- \"$cur\"))\n"
    "  else\n"
    "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
    "  fi\n"
    "}\n"
    "complete -F _agt agt\n";

static const char fish_script[] =
    "# agt completion for fish: agt completion fish > ~/.config/fish/completions/agt.fish\n"
    "function __agt_complete\n"
    "    set -l words (commandline -opc)\n"
    "    set -l cur (commandline -ct)\n"
    "    set -l agt $words[1]\n"
    "    set -l help (command $agt --help 2>/dev/null)\n"
    "    set -l cmdpath\n"
    "    set -l at_command 1\n"
    "    for w in $words[2..-1]\n"
    "        string match -q -- '-*' $w; and continue\n"
    "        set -l names (printf '%s\\n' $help | sed -n '/^commands:/,/^$/{s/^  "
    "\\([a-z][a-z-]*\\) .*/\\1/p}')\n"
    "        if contains -- $w $names\n"
    "            set cmdpath $cmdpath $w\n"
    "            set help (command $agt $cmdpath --help 2>/dev/null)\n"
    "        else\n"
    "            set at_command 0\n"
    "            break\n"
    "        end\n"
    "    end\n"
    "    if string match -q -- '-*' $cur\n"
    "        printf '%s\\n' $help | sed -n 's/^ *\\(-[a-zA-Z], \\)\\{0,1\\}\\(--[a-z][a-z0-9-]*\\) "
    "*\\(.*\\)/\\2\\t\\3/p'\n"
    "    else if test $at_command = 1\n"
    "        printf '%s\\n' $help | sed -n '/^commands:/,/^$/{s/^  \\([a-z][a-z-]*\\)  "
    "*\\(.*\\)/\\1\\t\\2/p}'\n"
    "    end\n"
    "end\n"
    "complete -c agt -f -a '(__agt_complete)'\n";

static const struct agt_cmd_help help = {
    "agt completion bash|zsh|fish",
    "Print a completion script for the shell; it takes commands and options from agt's own "
    "--help.  bash: eval \"$(agt completion bash)\"; zsh: eval \"$(agt completion zsh)\"; fish: "
    "agt completion fish > ~/.config/fish/completions/agt.fish.",
    NULL};

int cmd_completion(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  int i = agt_cmd_opts(argc, argv, &help, NULL, NULL, err);

  (void)c;
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", help.usage);
  if (strcmp(argv[i], "bash") == 0) {
    fputs(bash_script, stdout);
  } else if (strcmp(argv[i], "zsh") == 0) {
    fputs("# agt completion for zsh: eval \"$(agt completion zsh)\" in ~/.zshrc (bash's, through\n"
          "# zsh's bashcompinit)\n"
          "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
          "autoload -U +X bashcompinit && bashcompinit\n",
          stdout);
    fputs(bash_script, stdout);
  } else if (strcmp(argv[i], "fish") == 0) {
    fputs(fish_script, stdout);
  } else {
    return agt_error_kind(err, AGT_E_INVALID, "agt completion: '%s' is not bash, zsh or fish",
                          argv[i]);
  }
  return 0;
}
