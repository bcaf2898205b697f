#!/bin/sh
# Installs the build dependencies (Debian), builds ofi_layer in ./build and runs the
# demonstration: ping-pong and bandwidth between two processes over tcp;ofi_layer on
# 127.0.0.1, side by side with tcp;ofi_rxm.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/install-deps.sh"
build=${BUILD_DIR:-$top/build}
[ -x "$top/configure" ] || "$top/autogen.sh"
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$top/configure"
make -j"$(nproc)"
"$top/contrib/demo.sh" "$build"
