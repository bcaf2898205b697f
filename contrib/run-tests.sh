#!/bin/sh
# Builds ofi_layer out of tree in ./build and runs the whole test suite (make check).
# CONFIGURE_FLAGS adds configure options, e.g. CONFIGURE_FLAGS=--enable-werror.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
[ -x "$top/configure" ] || "$top/autogen.sh"
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$top/configure" $CONFIGURE_FLAGS
make -j"$(nproc)"
make -j"$(nproc)" check || { cat test-suite.log 2>/dev/null; exit 1; }
