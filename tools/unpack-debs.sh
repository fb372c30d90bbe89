#!/usr/bin/env bash
# Unpack (never install) Debian packages of any suite and architecture into DIR, from Debian's package
# registry, with a private apt state: the machine's own apt configuration and packages are left alone.
# The tests use it for programs this machine has no package of: CPython 3.14 (sid, tools/python314.sh)
# and an aarch64 CPython to crash under qemu-user (tests/test_aarch64_core.py).
# Usage: tools/unpack-debs.sh SUITE ARCH DIR PACKAGE...
set -euo pipefail
suite=${1:?usage: tools/unpack-debs.sh SUITE ARCH DIR PACKAGE...}
arch=${2:?}
root=$(realpath -m "${3:?}")
shift 3
apt_dir="$root.apt"
mkdir -p "$root" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts" "$apt_dir/debs"
cat > "$apt_dir/parts/$suite.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Architectures: $arch
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
options=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt_dir/parts"
         -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Debug::NoLocking=1"
         -o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
apt-get -qq "${options[@]}" update
(cd "$apt_dir/debs" && apt-get -qq "${options[@]}" download "$@" 2>&1 | grep -v "unsandboxed" >&2 || true)
for package in "$@"; do
    deb=$(ls "$apt_dir"/debs/"${package%%:*}"_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { echo "not downloaded: $package" >&2; exit 1; }
    dpkg-deb -x "$deb" "$root"
done
