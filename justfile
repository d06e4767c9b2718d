# agt recipes. `just --list` explains each; `./dev RECIPE` installs the dependencies first.

set shell := ["bash", "-euo", "pipefail", "-c"]
set positional-arguments

npm_arch := if arch() == "aarch64" { "arm64" } else { "x64" }

# The Lima release ./dev deps builds from its Go module (the only place it is pinned; ./dev
# and meson read it from this line).
lima_version := "v2.2.0"

# limactl as ./dev deps installs it: Lima's release layout (bin/limactl, share/lima/...)
# under /var/cache/agt/lima/VERSION, never in root's PATH (limactl refuses root, and with
# limactl in PATH agt's default target would be the VM).  The tests against the real Lima
# run it from here as an unprivileged user.
export AGT_LIMACTL := env("AGT_LIMACTL", "/var/cache/agt/lima/" + lima_version + "/bin/limactl")

# The real opencode binary that tests put into jails (./dev deps installs it there).
export AGT_OPENCODE_BIN := env("AGT_OPENCODE_BIN", "/var/cache/agt/npm/node_modules/opencode-linux-" + npm_arch + "/bin/opencode")

_list:
    @"{{ just_executable() }}" --justfile "{{ justfile() }}" --list

# Configure build/ (debugoptimized) if needed, then compile agtd, agt and the tests
build: (_setup "build" "--buildtype=debugoptimized")
    meson compile -C build

# Build, then run every test suite (root-only tests run when root); args go to meson test
test *args: build
    bash scripts/meson-test.sh build "$@"

# Build, then run only the unit suite (cmocka, no privilege)
unit *args: build
    bash scripts/meson-test.sh build --suite unit "$@"

# Build, then run only the guest suite (root + Linux: namespaces, mounts, jails)
guest *args: build
    bash scripts/meson-test.sh build --suite guest "$@"

# Build in build-asan/ with AddressSanitizer + UBSan and run every test suite there
asan *args: (_setup "build-asan" "--buildtype=debugoptimized" "-Db_sanitize=address,undefined" "-Db_lundef=false")
    meson compile -C build-asan
    bash scripts/meson-test.sh build-asan "$@"

# Cross-build agt for macOS (aarch64 and x86_64, or the arches named) with zig; `file` checks each
macos-build *arches:
    bash scripts/macos-build.sh "$@"

# Fuzz the wire codec, YAML and manifest loaders for SECONDS each (build-fuzz/: clang, ASan+UBSan)
fuzz seconds="60":
    if [ ! -f build-fuzz/build.ninja ]; then CC=clang meson setup build-fuzz --buildtype=debugoptimized -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false; fi
    meson compile -C build-fuzz fuzz-proto fuzz-yaml fuzz-manifest
    bash tests/fuzz/run.sh build-fuzz "$1"

# Run the side-by-side benchmarks (bench/run.sh)
bench: _have-bench build
    bash bench/run.sh

# As root: lima/provision/machine.sh, the VM's settings for jails on this machine (again after a reboot)
machine:
    lima/provision/machine.sh

# Build, then run the demo: build the default rootfs and run several jails at once
demo: build
    bash scripts/demo.sh

# The lima-* recipes are thin calls of the agt built here (build/host/agt).  Its target is
# the config's, else lima:$AGT_INSTANCE when limactl is in PATH, else local (Linux: agtd on
# this machine, no VM).  docs/HOST.md describes each command.
agt := justfile_directory() / "build" / "host" / "agt"

# Create the Lima VM if missing, start it, wait for agtd (target local: start agtd)
lima-up: build
    "{{ agt }}" up

# A login shell in the VM, or one command in it: just lima-shell uname -a
lima-shell *args: build
    "{{ agt }}" shell "$@"

# Copy the VM into a new VM NAME (a gold image); a running VM is stopped for the copy
lima-clone name: build
    "{{ agt }}" clone "$1"

# Replace the VM by a copy of the stopped gold VM NAME, then start it (asks; --force without a terminal)
lima-restore name *args: build
    "{{ agt }}" restore "$@"

# Stop the VM
lima-stop: build
    "{{ agt }}" stop

# Delete the VM and its disk (asks first; pass --force when there is no terminal)
lima-delete *args: build
    "{{ agt }}" delete "$@"

# Factory-reset the VM: a fresh disk, the same settings (asks; --force without a terminal)
lima-reset *args: build
    "{{ agt }}" reset "$@"

# Up, then agt verify: 8 real opencode jails at once, checked (args go to agt verify)
lima-verify-run *args: build
    "{{ agt }}" up
    "{{ agt }}" verify "$@"

# Check the host, the VM and the guest; each failure comes with its fix
lima-doctor: build
    "{{ agt }}" doctor

# Build (or find, cached) the Debian 12 guest image for a Lima VM under QEMU; print its directory
lima-image:
    bash scripts/lima-image.sh

# A real Lima VM under QEMU (TCG): up, verify --jails 2, clone gold, restore, reset, delete; timed
lima-e2e: build
    bash scripts/lima-e2e.sh

# Format every tracked (or new, not ignored) *.c and *.h with clang-format
fmt:
    git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' | xargs -0 -r clang-format -i

# Check formatting (clang-format --dry-run --Werror) and shell syntax (bash -n)
lint:
    bash scripts/lint.sh

# Remove the build directories
clean:
    rm -rf build build-asan build-fuzz build-macos

# meson setup DIR OPTIONS... unless DIR is already configured
_setup dir *opts:
    if [ ! -f "$1/build.ninja" ]; then meson setup "$@"; fi

_have-bench:
    @if [ ! -f bench/run.sh ]; then echo "agt: no benchmarks exist yet (bench/run.sh is missing)" >&2; exit 1; fi
