#!/usr/bin/env bash
# The unprivileged user that runs the real limactl in tests and recipes (limactl refuses
# to run as root, and CI runs as root): created when absent, with a home for its
# LIMA_HOME.  Idempotent; prints the user's name.  Needs root when the user is absent.
#
#   scripts/lima-user.sh [NAME]     (default: agtlima)
set -euo pipefail
user=${1:-agtlima}
if ! id -u "$user" >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || {
    echo "agt: the user '$user' does not exist, and only root can create it" >&2
    exit 1
  }
  # another process may create it at the same moment: then useradd fails and id succeeds
  useradd --create-home --shell /bin/bash --user-group "$user" 2>/dev/null || id -u "$user" >/dev/null
fi
echo "$user"
