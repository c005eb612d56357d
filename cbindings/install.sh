#!/bin/sh
# Installs libvds for C and C++ programs:
#   cbindings/install.sh PREFIX        (e.g. /usr/local, or $HOME/.local)
# then: cc app.c $(pkg-config --cflags --libs vds)
# with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig when PREFIX is not a system prefix.
#
# Builds the release libraries with cargo unless VDS_BUILD_DIR names a
# directory that already holds libvds.so and libvds.a. VDS_FEATURES=remote
# builds a library whose vds_open also reads http://, https:// and s3:// URLs.
set -eu
prefix=${1:?usage: install.sh PREFIX}
here=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -n 1)
major=0  # the soname's ABI version, as in build.rs
if [ -z "${VDS_BUILD_DIR:-}" ]; then
    cargo build --release --lib -p vds ${VDS_FEATURES:+--features "$VDS_FEATURES"} --manifest-path "$here/Cargo.toml"
    VDS_BUILD_DIR="$here/target/release"
fi
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
cp "$VDS_BUILD_DIR/libvds.so" "$prefix/lib/libvds.so.$version"
ln -sf "libvds.so.$version" "$prefix/lib/libvds.so.$major"
ln -sf "libvds.so.$major" "$prefix/lib/libvds.so"
cp "$VDS_BUILD_DIR/libvds.a" "$prefix/lib/libvds.a"
cp "$here/include/vds.h" "$here/cbindings/vds.hpp" "$prefix/include/"
cat > "$prefix/lib/pkgconfig/vds.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: vds
Description: Chunked N-dimensional arrays in one crash-safe, checksummed file
Version: $version
Libs: -L\${libdir} -lvds
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
PC
echo "installed libvds $version into $prefix"
