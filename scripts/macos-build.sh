#!/usr/bin/env bash
# macos-build.sh [ARCH...]: cross-build agt (host/ and common/) for macOS with zig's C
# compiler, one Mach-O executable per arch (aarch64, x86_64; both by default), and check with
# `file` that each is one.  `just macos-build` runs it; `./dev deps` installs what it uses
# (zig from PyPI's ziglang, cmake, Debian's deb-src index).
#
# The libraries agt links (libssh with mbedTLS as its crypto backend, libyaml, jansson) are
# built for macOS from Debian's source packages (`apt-get source PKG/SUITE`, Debian's patches
# applied) and kept under $AGT_MACOS_CACHE, one prefix per arch keyed by the zig version, the
# packages' versions and RECIPE below: a second run only checks.  agt itself is built with
# meson from this tree into build-macos/ARCH/.  Nothing here runs on macOS: the binaries are
# built and inspected, never executed (docs: README.md, "agt on macOS").
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
ZIG="${AGT_ZIG:-/var/cache/agt/zig/bin/zig}"
CACHE="${AGT_MACOS_CACHE:-/var/cache/agt/macos}"
# The oldest macOS the binaries are for: the oldest zig 0.14 links for (its libSystem stubs).
MACOS_MIN=11.0
# Debian's suite the sources come from: the one this machine runs (VERSION_CODENAME).
SUITE="${AGT_MACOS_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}"
# The source packages, in build order (libssh needs mbedTLS).
PACKAGES=(mbedtls libyaml jansson libssh)
# Bump when the way the libraries are built changes, so the cache is rebuilt.
RECIPE=1

say() { printf 'agt: macos: %s\n' "$*"; }
die() {
  printf 'agt: macos: error: %s\n' "$*" >&2
  exit 1
}

[[ -x $ZIG ]] || die "no zig at $ZIG: run ./dev deps (it installs PyPI's ziglang), or set AGT_ZIG"
command -v cmake >/dev/null || die "no cmake: run ./dev deps"
command -v file >/dev/null || die "no file(1): run ./dev deps"
zig_version="$("$ZIG" version)"

archs=("$@")
[[ ${#archs[@]} -gt 0 ]] || archs=(aarch64 x86_64)
for a in "${archs[@]}"; do
  case "$a" in
    aarch64 | x86_64) ;;
    *) die "unknown arch '$a': aarch64 or x86_64" ;;
  esac
done

# --- the sources --------------------------------------------------------------------------

# The version of PKG that `apt-get source PKG/SUITE` fetches, from its .dsc's name.
src_version() {
  local dsc
  dsc="$(apt-get source --print-uris "$1/$SUITE" 2>/dev/null | awk '$2 ~ /\.dsc$/ { print $2; exit }')"
  [[ -n $dsc ]] || die "Debian's archive offers no source of '$1' in $SUITE: is there a deb-src line? (./dev deps adds one)"
  dsc="${dsc%.dsc}"
  printf '%s\n' "${dsc#*_}"
}

declare -A VERSION SRCDIR
fetch_sources() {
  local p v dir
  mkdir -p "$CACHE/src"
  for p in "${PACKAGES[@]}"; do
    v="$(src_version "$p")"
    VERSION[$p]=$v
    dir="$CACHE/src/${p}_$v"
    if [[ ! -f $dir/.agt-unpacked ]]; then
      say "apt-get source $p/$SUITE ($v)"
      rm -rf "$dir"
      mkdir -p "$dir"
      (cd "$dir" && apt-get source -q "$p/$SUITE" >apt-source.log 2>&1) ||
        die "apt-get source $p/$SUITE failed: $(tail -n 3 "$dir/apt-source.log")"
      touch "$dir/.agt-unpacked"
    fi
    # the unpacked tree: the one directory apt-get source made
    SRCDIR[$p]="$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
    [[ -n ${SRCDIR[$p]} ]] || die "apt-get source $p left no source tree in $dir"
  done
}

# --- the libraries, per arch ---------------------------------------------------------------

# A compiler wrapper per arch: cmake and meson take a compiler as one program.
write_wrappers() { # ARCH DIR
  local arch=$1 dir=$2 tool
  mkdir -p "$dir"
  # Meson (1.0, Debian 12's) names the linker from `CC -Wl,--version` and knows no "zig ld":
  # it is told ld64.lld, whose ld64 dialect of options zig's Mach-O linker speaks.
  cat >"$dir/cc" <<EOF
#!/bin/sh
case "\$*" in
  -Wl,--version) echo "LLD 18 (zig ld $zig_version, ld64 options)"; exit 0 ;;
  -Wl,-v) echo "ld64.lld (zig ld $zig_version)" >&2; exit 0 ;;
esac
exec "$ZIG" cc -target $arch-macos.$MACOS_MIN "\$@"
EOF
  printf '#!/bin/sh\nexec "%s" ar "$@"\n' "$ZIG" >"$dir/ar"
  # cmake gives Apple's ranlib its own options (-no_warning_for_no_symbols -c), which llvm's
  # does not know: only the archives go through.
  printf '#!/bin/sh\nfor a; do shift; case "$a" in -*) ;; *) set -- "$@" "$a" ;; esac; done\nexec "%s" ranlib "$@"\n' \
    "$ZIG" >"$dir/ranlib"
  chmod +x "$dir/cc" "$dir/ar" "$dir/ranlib"
}

cmake_lib() { # ARCH PREFIX WRAPDIR PKG CMAKE-ARGS...
  local arch=$1 prefix=$2 wrap=$3 pkg=$4
  local build="$prefix.build/$pkg"
  shift 4
  say "$arch: building $pkg ${VERSION[$pkg]}"
  rm -rf "$build"
  mkdir -p "$build"
  if ! cmake -S "${SRCDIR[$pkg]}" -B "$build" -G Ninja \
    -DCMAKE_SYSTEM_NAME=Darwin \
    -DCMAKE_SYSTEM_PROCESSOR="$([[ $arch == aarch64 ]] && echo arm64 || echo x86_64)" \
    -DCMAKE_C_COMPILER="$wrap/cc" \
    -DCMAKE_AR="$wrap/ar" \
    -DCMAKE_RANLIB="$wrap/ranlib" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_FIND_ROOT_PATH="$prefix" \
    -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER \
    -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY \
    -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
    -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY \
    -DBUILD_SHARED_LIBS=OFF \
    "$@" >"$build/configure.log" 2>&1; then
    tail -n 30 "$build/configure.log" >&2
    die "$arch: cmake could not configure $pkg (log: $build/configure.log)"
  fi
  if ! cmake --build "$build" >"$build/build.log" 2>&1 ||
    ! cmake --install "$build" >"$build/install.log" 2>&1; then
    tail -n 30 "$build/build.log" >&2
    die "$arch: $pkg does not build (log: $build/build.log)"
  fi
}

build_libs() { # ARCH PREFIX WRAPDIR
  local arch=$1 prefix=$2 wrap=$3
  rm -rf "$prefix" "$prefix.build"
  mkdir -p "$prefix"
  # mbedTLS: libssh's simplest crypto backend to build for macOS (plain C, cmake, no
  # assembler, no framework); the library alone, without its programs and tests.
  cmake_lib "$arch" "$prefix" "$wrap" mbedtls \
    -DENABLE_PROGRAMS=OFF -DENABLE_TESTING=OFF -DMBEDTLS_FATAL_WARNINGS=OFF \
    -DUSE_SHARED_MBEDTLS_LIBRARY=OFF -DUSE_STATIC_MBEDTLS_LIBRARY=ON
  cmake_lib "$arch" "$prefix" "$wrap" libyaml -DBUILD_TESTING=OFF -DINSTALL_CMAKE_DIR=lib/cmake/yaml
  cmake_lib "$arch" "$prefix" "$wrap" jansson \
    -DJANSSON_BUILD_DOCS=OFF -DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON \
    -DJANSSON_BUILD_SHARED_LIBS=OFF
  # libssh: a client and server library; no GSSAPI (a framework on macOS), no zlib, no
  # examples.  Symbol versioning is a GNU ld feature.
  cmake_lib "$arch" "$prefix" "$wrap" libssh \
    -DWITH_MBEDTLS=ON -DMBEDTLS_ROOT_DIR="$prefix" -DWITH_GSSAPI=OFF -DWITH_ZLIB=OFF \
    -DWITH_EXAMPLES=OFF -DWITH_SYMBOL_VERSIONING=OFF -DWITH_PCAP=OFF -DUNIT_TESTING=OFF
  # libssh.pc names -lssh alone; a static libssh needs mbedTLS after it.
  printf 'Libs.private: -lmbedx509 -lmbedtls -lmbedcrypto -lpthread\n' >>"$prefix/lib/pkgconfig/libssh.pc"
  # libyaml's cmake build installs no yaml-0.1.pc (its autotools build does).
  if [[ ! -f $prefix/lib/pkgconfig/yaml-0.1.pc ]]; then
    cat >"$prefix/lib/pkgconfig/yaml-0.1.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: LibYAML
Description: Library to parse and emit YAML
Version: ${VERSION[libyaml]%%-*}
Cflags: -I\${includedir} -DYAML_DECLARE_STATIC
Libs: -L\${libdir} -lyaml
EOF
  fi
  rm -rf "$prefix.build"
}

# --- agt ---------------------------------------------------------------------------------

build_agt() { # ARCH PREFIX WRAPDIR
  local arch=$1 prefix=$2 wrap=$3
  local bdir="$ROOT/build-macos/$arch" cross="$ROOT/build-macos/$arch.ini"
  mkdir -p "$ROOT/build-macos"
  cat >"$cross.new" <<EOF
# Written by scripts/macos-build.sh: agt for $arch macOS $MACOS_MIN+ with zig $zig_version.
[binaries]
c = '$wrap/cc'
ar = '$wrap/ar'
pkgconfig = 'pkg-config'

[properties]
pkg_config_libdir = '$prefix/lib/pkgconfig'

[host_machine]
system = 'darwin'
cpu_family = '$arch'
cpu = '$arch'
endian = 'little'
EOF
  # a changed cross file (another zig, another prefix) needs a new build directory
  if ! cmp -s "$cross.new" "$cross"; then
    mv "$cross.new" "$cross"
    rm -rf "$bdir"
  else
    rm -f "$cross.new"
  fi
  if [[ ! -f $bdir/build.ninja ]]; then
    say "$arch: meson setup $bdir"
    meson setup "$bdir" "$ROOT" --cross-file "$cross" -Dtests=false \
      -Dprefer_static=true -Ddefault_library=static >"$ROOT/build-macos/$arch.setup.log" 2>&1 || {
      tail -n 30 "$ROOT/build-macos/$arch.setup.log" >&2
      die "$arch: meson setup failed (log: build-macos/$arch.setup.log)"
    }
  fi
  say "$arch: meson compile -C $bdir agt"
  meson compile -C "$bdir" host/agt || die "$arch: agt does not build for macOS"
}

check_macho() { # ARCH FILE
  local arch=$1 f=$2 what want
  want="$([[ $arch == aarch64 ]] && echo arm64 || echo x86_64)"
  what="$(file -b "$f")"
  if [[ $what == "Mach-O 64-bit $want executable"* || $what == "Mach-O 64-bit executable $want"* ]]; then
    say "$arch: ${f#"$ROOT"/}: $what"
  else
    die "$arch: ${f#"$ROOT"/} is not a Mach-O $want executable: $what"
  fi
}

fetch_sources
key="zig$zig_version-macos$MACOS_MIN-r$RECIPE"
for p in "${PACKAGES[@]}"; do
  key+="-$p${VERSION[$p]}"
done
key="$(printf '%s' "$key" | sha256sum | cut -c1-16)"
for arch in "${archs[@]}"; do
  prefix="$CACHE/$arch-$key"
  wrap="$CACHE/bin/$arch-zig$zig_version"
  write_wrappers "$arch" "$wrap"
  if [[ -f $prefix/.agt-complete ]]; then
    say "$arch: libraries present ($prefix)"
  else
    build_libs "$arch" "$prefix" "$wrap"
    {
      echo "zig $zig_version, macOS $MACOS_MIN, recipe $RECIPE"
      for p in "${PACKAGES[@]}"; do echo "$p ${VERSION[$p]} ($SUITE)"; done
    } >"$prefix/.agt-complete"
  fi
  build_agt "$arch" "$prefix" "$wrap"
  check_macho "$arch" "$ROOT/build-macos/$arch/host/agt"
done
