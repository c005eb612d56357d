#!/bin/sh
# Installs what the tests need beyond a Rust toolchain, when it is missing:
# a C and a C++ compiler, binutils (nm, readelf), pkg-config and valgrind.
# Used by .ci/run and by the README's test command.
set -eu
missing=""
for tool in cc:gcc c++:g++ nm:binutils readelf:binutils pkg-config:pkg-config valgrind:valgrind ldd:libc-bin python3:python3; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing="$missing ${tool#*:}"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq $missing
