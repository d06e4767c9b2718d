#!/usr/bin/env bash
# check-portable.sh SOURCE_ROOT BUILD_ROOT CC [CC_ARGS...]
#
# agt (host/) must build and run on macOS as well as Linux: POSIX plus libssh, libyaml and
# jansson.  `just macos-build` compiles and links it for macOS for real (CI runs it); this
# quicker check, run by the unit suite (TAP), keeps the Linux build honest in between:
#   1. compiles every host/*.c with -std=c11 -D_XOPEN_SOURCE=700 (POSIX.1-2008 with its
#      XSI part, which macOS implements; no _GNU_SOURCE) and -Werror;
#   2. fails on any Linux-only header or call in host/;
#   3. fails on the same in common/, which agt links too.
set -u
shopt -s nullglob
src=${1:?usage: check-portable.sh SOURCE_ROOT BUILD_ROOT CC [CC_ARGS...]}
build=${2:?}
shift 2
cc=("$@") # the compiler as meson runs it (it may start with ccache)
[ "${#cc[@]}" -gt 0 ] || cc=(cc)
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }

cflags=$(pkg-config --cflags libssh yaml-0.1 jansson 2>/dev/null)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for f in "$src"/host/*.c; do
  name=host/$(basename "$f")
  # -Wno-missing-field-initializers as meson.build has it: an option entry may leave out the
  # fields it does not use (common/cli.h)
  # shellcheck disable=SC2086
  if "${cc[@]}" -std=c11 -D_XOPEN_SOURCE=700 -Wall -Wextra -Wno-missing-field-initializers \
    -Werror -fsyntax-only \
    -I"$src/common" -I"$src/host" -I"$build" -I"$build/host" $cflags "$f" >"$tmp/out" 2>&1; then
    ok "$name compiles as strict POSIX C11"
  else
    not_ok "$name compiles as strict POSIX C11"
    sed 's/^/#   /' "$tmp/out" | head -20
  fi
done

# Headers that exist only on Linux (or only with glibc), and calls and flags that do.
headers='<(linux/[^>]*|asm/[^>]*|gnu/[^>]*|sys/(prctl|epoll|mount|signalfd|eventfd|timerfd|inotify|fanotify|sysmacros|capability|syscall|personality|fsuid|vfs|statfs|sendfile|random|klog|reboot|swap|sysinfo|xattr)\.h|(sched|mntent|seccomp|features|error|malloc|alloca|endian|byteswap|pty)\.h)>'
calls='\b(epoll_[a-z_]+|prctl|unshare|pivot_root|setns|clone3?|signalfd|eventfd|timerfd_[a-z]+|inotify_[a-z_]+|pipe2|accept4|dup3|memfd_create|getrandom|sendfile|splice|tee|copy_file_range|syscall|mount|umount2?|statfs|fstatfs|execvpe|get_current_dir_name|canonicalize_file_name|strchrnul|memrchr|mempcpy|getauxval|sched_setaffinity|posix_fadvise|fallocate)[[:space:]]*\(|\b(SOCK_CLOEXEC|SOCK_NONBLOCK|O_PATH|O_TMPFILE|MSG_NOSIGNAL|program_invocation_(short_)?name|_GNU_SOURCE|__linux__)\b'

scan() { # scan FILE...: prints file:line: text for each hit, comments left out
  for f in "$@"; do
    perl -0777 -pe 's{/\*.*?\*/}{join("", map {"\n"} ($& =~ /\n/g))}gse; s{//[^\n]*}{}g' "$f" |
      grep -nE "#[[:space:]]*include[[:space:]]*$headers|$calls" |
      sed "s|^|$(basename "$(dirname "$f")")/$(basename "$f"):|"
  done
}

hits=$(scan "$src"/host/*.c "$src"/host/*.h)
if [ -z "$hits" ]; then
  ok "host/ uses no Linux-only header, call or flag"
else
  not_ok "host/ uses no Linux-only header, call or flag"
  printf '%s\n' "$hits" | sed 's/^/#   /'
fi

# common/ as agt links it (common/meson.build's sources).
for f in "$src"/common/*.c "$src"/common/*.h; do
  h=$(scan "$f")
  if [ -z "$h" ]; then
    ok "common/$(basename "$f"): nothing Linux-only"
  else
    not_ok "common/$(basename "$f"): $(printf '%s' "$h" | head -3 | tr '\n' ' ')"
  fi
done

echo "1..$n"
[ "$failed" -eq 0 ]
