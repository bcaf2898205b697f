#!/bin/sh
# Builds ofi_layer against the libfabric installed in PREFIX and runs the whole test suite
# with that library:
#	contrib/test-libfabric.sh PREFIX
# PREFIX holds include/rdma/, lib/libfabric.so and bin/fi_info (a libfabric "make install",
# or /usr for the system's). The build goes to BUILD_DIR (default build-libfabric-VERSION),
# with warnings as errors. Fails, rather than skipping, when PREFIX's fi_info does not offer
# ofi_layer over tcp in both spellings: every functional test would skip itself then.
# Ends with run-tests.sh's line "tests: N passed, N failed, N skipped".
set -e
usage() { echo "usage: $0 PREFIX (a libfabric install: include/, lib/, bin/fi_info)" >&2; exit 2; }
[ $# -eq 1 ] || usage
prefix=$(cd "$1" 2>/dev/null && pwd) || usage
fi_info=$prefix/bin/fi_info
[ -x "$fi_info" ] && [ -f "$prefix/include/rdma/fabric.h" ] || usage
version=$("$fi_info" --version | sed -n 's/^libfabric: *//p')
[ -n "$version" ] || { echo "FAIL: $fi_info --version names no libfabric" >&2; exit 1; }

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build-libfabric-$version}
echo "libfabric $version in $prefix; building in $build"
[ -x "$top/configure" ] || "$top/autogen.sh"
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ]; then
	# /usr is the system's: pkg-config finds it (and its multiarch lib directory)
	with=--with-libfabric=$prefix
	[ "$prefix" = /usr ] && with=
	"$top/configure" $with --enable-werror >configure.out ||
		{ cat configure.out; exit 1; }
fi
make -j"$(nproc)" >/dev/null

# The provider must be offered, in both spellings, by this libfabric's own fi_info.
for prov in "tcp;ofi_layer" "ofi_layer;tcp"; do
	if ! FI_PROVIDER_PATH=$build/.libs "$fi_info" -p "$prov" 2>&1 |
		grep -q "provider: tcp;ofi_layer"; then
		echo "FAIL: libfabric $version does not offer $prov: FI_LOG_LEVEL=warn" \
			"FI_PROVIDER_PATH=$build/.libs $fi_info -p '$prov' says why" >&2
		exit 1
	fi
	echo "ok: libfabric $version's fi_info offers $prov"
done

BUILD_DIR=$build "$top/contrib/run-tests.sh"
