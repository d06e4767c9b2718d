#!/usr/bin/env bash
# formula-check.sh SOURCE_ROOT: Formula/agt.rb, checked by reading (TAP).  Homebrew cannot
# run here; these are the rules of `brew audit --strict` and Homebrew's style (rubocop's
# FormulaAudit cops) that can be checked without it, plus agreement with meson.build.
set -u
src=${1:?usage: formula-check.sh SOURCE_ROOT}
f="$src/Formula/agt.rb"
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}

[ -f "$f" ] || {
  echo "not ok 1 - $f exists"
  echo "1..1"
  exit 1
}

# ruby's own parser, when ruby is there (./dev deps installs it)
if command -v ruby >/dev/null; then
  check "ruby -c parses it" bash -c 'ruby -c "$1" >/dev/null' _ "$f"
else
  echo "ok $((n + 1)) - ruby -c # SKIP no ruby"
  n=$((n + 1))
fi

field() { sed -n "s/^  $1 \"\\(.*\\)\"\$/\\1/p" "$f" | head -n 1; }
desc=$(field desc)
homepage=$(field homepage)
url=$(field url)
sha=$(field sha256)
license=$(field license)
version=$(sed -n "s/^  version : '\\(.*\\)',\$/\\1/p" "$src/meson.build")
meson_license=$(sed -n "s/^  license : '\\(.*\\)',\$/\\1/p" "$src/meson.build")

check "class Agt < Formula, as the file name says" grep -q '^class Agt < Formula$' "$f"
check "desc is there, under 80 characters: '$desc'" test -n "$desc" -a "${#desc}" -lt 80
check "desc starts with no article and not with the name" \
  bash -c '! [[ $1 =~ ^(A|An|The|agt|Agt)[[:space:]] ]]' _ "$desc"
check "desc ends without a period" bash -c '[[ $1 != *. ]]' _ "$desc"
check "homepage and url are https" bash -c '[[ $1 == https://* && $2 == https://* ]]' _ "$homepage" "$url"
check "url names the tarball of meson.build's version ($version): $url" \
  bash -c '[[ $1 == */agt-$2.tar.xz ]]' _ "$url" "$version"
check "sha256 is 64 hex digits" bash -c '[[ $1 =~ ^[0-9a-f]{64}$ ]]' _ "$sha"
check "a placeholder url has the all-zero sha256, a real one a real sha256" \
  bash -c '[[ ($1 == https://example.com/* && $2 =~ ^0{64}$) || ($1 != https://example.com/* && ! $2 =~ ^0{64}$) ]]' _ "$url" "$sha"
check "license is meson.build's ($meson_license)" test "$license" = "$meson_license"
check "no version line: brew reads it from the url" bash -c '! grep -q "^  version " "$1"' _ "$f"

# the order of the parts (rubocop FormulaAudit/ComponentsOrder)
order=$(grep -oE '^  (desc|homepage|url|sha256|license|head|livecheck|bottle|depends_on|uses_from_macos|def install|test do)' "$f" |
  sed 's/^  //' | uniq | tr '\n' ',')
check "parts in Homebrew's order: $order" \
  test "$order" = "desc,homepage,url,sha256,license,depends_on,def install,test do,"

# dependencies: build ones first, each group sorted; what meson.build needs for agt
build_deps=$(sed -n 's/^  depends_on "\([^"]*\)" => :build$/\1/p' "$f")
run_deps=$(sed -n 's/^  depends_on "\([^"]*\)"$/\1/p' "$f")
last_build=$(grep -n '=> :build$' "$f" | tail -n 1 | cut -d: -f1)
first_run=$(grep -n '^  depends_on "[^"]*"$' "$f" | head -n 1 | cut -d: -f1)
check "build dependencies before the others" test "${last_build:-0}" -lt "${first_run:-0}"
check "build dependencies sorted" test "$build_deps" = "$(printf '%s\n' "$build_deps" | LC_ALL=C sort)"
check "run dependencies sorted" test "$run_deps" = "$(printf '%s\n' "$run_deps" | LC_ALL=C sort)"
check "pkgconf, not pkg-config (renamed in Homebrew)" bash -c 'grep -q "\"pkgconf\" => :build" "$1" && ! grep -q "\"pkg-config\"" "$1"' _ "$f"
for dep in meson ninja; do
  check "builds with $dep" bash -c 'printf "%s\n" "$1" | grep -qx "$2"' _ "$build_deps" "$dep"
done
for pair in jansson:jansson libssh:libssh yaml-0.1:libyaml; do
  check "meson.build's dependency('${pair%%:*}') is Homebrew's ${pair#*:}" \
    bash -c 'grep -q "dependency('"'"'$1'"'"')" "$2/meson.build" && printf "%s\n" "$3" | grep -qx "$4"' \
    _ "${pair%%:*}" "$src" "$run_deps" "${pair#*:}"
done
check "lima: agt drives limactl" bash -c 'printf "%s\n" "$1" | grep -qx lima' _ "$run_deps"

# install: meson the way Homebrew's formulae call it, without the test suite (cmocka)
check "meson setup with std_meson_args and -Dtests=false" \
  grep -q '^    system "meson", "setup", "build", "-Dtests=false", \*std_meson_args$' "$f"
check "meson compile and install" bash -c 'grep -q "\"meson\", \"compile\", \"-C\", \"build\", \"--verbose\"" "$1" && grep -q "\"meson\", \"install\", \"-C\", \"build\"" "$1"' _ "$f"
check "the sources installed for the VM to build agtd from (pkgshare/src)" grep -q 'pkgshare/"src"' "$f"
check "meson installs the template the test renders" grep -q "install_data('../lima/agt.yaml'" "$src/host/meson.build"

# test do: agt --version and agt template --for darwin
check "test runs agt --version" grep -q 'shell_output("#{bin}/agt --version")' "$f"
check "test runs agt template --for darwin" grep -q 'shell_output("#{bin}/agt template --for darwin")' "$f"
check "no tabs, no trailing blanks" bash -c '! grep -qP "\t| +$" "$1"' _ "$f"

echo "1..$n"
[ "$failed" -eq 0 ]
