#!/bin/sh
# Open MPI's ofi MTL over tcp;ofi_layer and udp;ofi_layer on 127.0.0.1: builds
# tests/mpi/mpi_probe.c with mpicc and runs it with 2 and 3 ranks over each (LAYER_TEST_MPI_PROVS
# names others). Skipped (77) when Open MPI is not installed.
set -u
command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 || {
	echo "SKIP: Open MPI (openmpi-bin, libopenmpi-dev) not installed"; exit 77; }
src=$(cd "$(dirname "$0")" && pwd)/mpi_probe.c
exe=${LAYER_TEST_BUILDDIR:-.}/tests/mpi/mpi_probe
mkdir -p "$(dirname "$exe")"
mpicc -O2 -o "$exe" "$src" || { echo "FAIL: mpicc"; exit 1; }

root=
[ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
# Everything on loopback: the core's interface, Open MPI's own out-of-band channel.
export FI_TCP_IFACE=lo
# A sanitizer build of the provider: every rank loads the sanitizer's runtime first (mpirun's
# programs are not built with it), and Open MPI's own leaks are not ours.
asan_env=
lib=${FI_PROVIDER_PATH:-.}/liblayer-fi.so
asan=$( [ -f "$lib" ] && ldd "$lib" | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
	LD_PRELOAD=$asan ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
	export LD_PRELOAD ASAN_OPTIONS
	asan_env="-x LD_PRELOAD -x ASAN_OPTIONS"
fi
# The libfabric the provider is built against, which may not be the one Open MPI was linked
# with (libfabric keeps its soname and ABI from 1.x to 2.x).
lib_env=
if [ -n "${LAYER_TEST_FABRIC_LIBDIR:-}" ]; then
	LD_LIBRARY_PATH=$LAYER_TEST_FABRIC_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
	lib_env="-x LD_LIBRARY_PATH"
fi
pass=0 fail=0
for prov in ${LAYER_TEST_MPI_PROVS:-"tcp;ofi_layer" "udp;ofi_layer"}; do
	for np in 2 3; do
		# Open MPI asks without a provider name: FI_PROVIDER makes ofi_layer offer
		# the core named (it offers tcp only otherwise).
		if FI_PROVIDER=$prov timeout 180 mpirun $root --oversubscribe -np $np \
			--bind-to none --mca pml cm --mca mtl ofi \
			--mca mtl_ofi_provider_include "$prov" \
			--mca oob_tcp_if_include lo --mca btl self -x FI_PROVIDER \
			-x FI_PROVIDER_PATH -x FI_TCP_IFACE $lib_env $asan_env "$exe"; then
			pass=$((pass + 1))
		else
			echo "FAIL: $prov, $np ranks"
			fail=$((fail + 1))
		fi
	done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
