# agt's Homebrew formula.  This repository is its tap (README.md, "agt on macOS"):
#   brew tap agt/agt URL-OF-THIS-REPOSITORY
#   brew install agt/agt/agt
# url and sha256 are the release tarball's (meson dist), written by
# scripts/release-formula.sh; tests/formula-check.sh checks the formula's shape in CI.
# No release has been published yet: until one is, url is a placeholder under
# example.com, sha256 is all zeros, and `brew install` stops at the download.
class Agt < Formula
  desc "Run many AI coding agents at once, each in its own jail in a Lima VM"
  homepage "https://example.com/agt"
  url "https://example.com/agt/releases/agt-0.1.0.tar.xz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "Apache-2.0"

  depends_on "meson" => :build
  depends_on "ninja" => :build
  depends_on "pkgconf" => :build
  depends_on "jansson"
  depends_on "libssh"
  depends_on "libyaml"
  depends_on "lima"

  def install
    # The VM builds agtd from agt's sources: an installed agt mounts this copy of them
    # (vm.agt_source, docs/CONFIG.md).
    (pkgshare/"src").mkpath
    cp_r Dir["*"], pkgshare/"src"
    system "meson", "setup", "build", "-Dtests=false", *std_meson_args
    system "meson", "compile", "-C", "build", "--verbose"
    system "meson", "install", "-C", "build"
  end

  test do
    assert_equal "agt #{version}", shell_output("#{bin}/agt --version").strip
    yaml = shell_output("#{bin}/agt template --for darwin")
    assert_match(/^vmType: (vz|qemu)$/, yaml)
    assert_match "mountPoint: \"/opt/agt/src\"", yaml
    assert_match "location: \"#{pkgshare}/src\"", yaml
  end
end
