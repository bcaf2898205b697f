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
status=0
make -j"$(nproc)" check || status=$?
[ $status -eq 0 ] || cat test-suite.log 2>/dev/null
# One closing line in the plain form CI reads: programs passed and failed.
pass=$(sed -n 's/^# PASS: *//p' test-suite.log)
fail=$(sed -n 's/^# FAIL: *//p' test-suite.log)
err=$(sed -n 's/^# ERROR: *//p' test-suite.log)
skip=$(sed -n 's/^# SKIP: *//p' test-suite.log)
echo "tests: ${pass:-0} passed, $(( ${fail:-0} + ${err:-0} )) failed, ${skip:-0} skipped"
exit $status
