#!/bin/sh
# The README's demonstration: FI_MSG ping-pong latency and bandwidth between two processes on
# 127.0.0.1, tcp;ofi_layer side by side with tcp;ofi_rxm and with the tcp core's own connected
# MSG endpoint (tcp-msg, the limit for both), median of alternating repeats.
#
# usage: contrib/demo.sh [BUILD_DIR] [fi_layer_bench options...]
# BUILD_DIR defaults to ./build; further options go to fi_layer_bench (e.g. --quick, --csv,
# --tagged for the tagged rows and tag matching under load).
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
case $1 in
-*|'') ;;
*) build=$1; shift ;;
esac
build=$(cd "$build" && pwd) || exit 1
bench=$build/fi_layer_bench
if [ ! -x "$bench" ]; then
	echo "demo.sh: $bench not found: build first (make -C $build)" >&2
	exit 1
fi

# The provider loads from the build tree. FI_PROVIDER_PATH replaces libfabric's default
# directory, so keep that one too (for distributions that ship providers as plug-ins),
# unless it holds an installed liblayer-fi.so that would compete with the one under test.
path=$build/.libs
[ -e "$path/liblayer-fi.so" ] ||
	echo "demo.sh: $path/liblayer-fi.so not built: the tcp;ofi_layer column will say n/a" >&2
dso_dir=$(pkg-config --variable=libdir libfabric 2>/dev/null)/libfabric || dso_dir=
if [ -d "$dso_dir" ] && [ ! -e "$dso_dir/liblayer-fi.so" ]; then
	path=$path:$dso_dir
fi
FI_PROVIDER_PATH=$path
export FI_PROVIDER_PATH
# an inherited FI_PROVIDER filter would hide columns
unset FI_PROVIDER

echo "FI_PROVIDER_PATH=$FI_PROVIDER_PATH"
provs="tcp;ofi_layer,tcp;ofi_rxm,tcp-msg"
echo "$bench -p \"$provs\" $*"
exec "$bench" -p "$provs" "$@"
