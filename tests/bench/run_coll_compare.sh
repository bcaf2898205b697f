#!/bin/sh
# Collectives side by side: fi_coll_bench over "tcp;ofi_layer" and "tcp;ofi_rxm", and the same
# rows with Open MPI's collectives over its ofi MTL on "tcp;ofi_layer" (tests/mpi/coll_bench_mpi.c,
# built here with mpicc into $TMPDIR), for 4 and 8 ranks. A measurement, not a test: make check
# does not run it. Run it by hand on a quiet machine, from the build directory or with
# LAYER_TEST_BUILDDIR set.
#
# usage: run_coll_compare.sh [RANKS...]                                    (default: 4 8)
# environment: REPEATS (default 5), ITERS and WARMUP (default: each program's own), TIMEOUT
# (seconds for each program, default 1800), FI_COLL_BENCH (the fi_coll_bench to run),
# FI_PROVIDER_PATH (default: the build tree's .libs), LAYER_TEST_FABRIC_LIBDIR (the libfabric
# the provider is built against, given to Open MPI as tests/mpi/test_ompi.sh does).
#
# Both programs put rank r on CPU r mod (number of CPUs) and give the CPU up while they wait
# (fi_coll_bench: sched_yield on an empty CQ read; Open MPI: mpi_yield_when_idle), so that with
# more ranks than CPUs the ranks of either time-share alike. Figures are microseconds per call,
# the slowest rank's average, the median of the repeats. A row a provider failed shows
# "n/a (reason)"; the exit status is 1 only when a program could not run at all.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${LAYER_TEST_BUILDDIR:-.}
bench=${FI_COLL_BENCH:-$build/fi_coll_bench}
if [ ! -x "$bench" ]; then
	bench=$(command -v fi_coll_bench) || {
		echo "run_coll_compare: no fi_coll_bench in $build (make it) nor on PATH"
		exit 1
	}
fi
if [ -z "${FI_PROVIDER_PATH:-}" ] && [ -f "$build/.libs/liblayer-fi.so" ]; then
	FI_PROVIDER_PATH=$(cd "$build/.libs" && pwd)
fi
prov_env=
if [ -n "${FI_PROVIDER_PATH:-}" ]; then
	export FI_PROVIDER_PATH
	prov_env="-x FI_PROVIDER_PATH"
fi
# Everything on loopback: the core's interface, Open MPI's own out-of-band channel.
FI_TCP_IFACE=lo
export FI_TCP_IFACE
to=${TIMEOUT:-1800}
first="tcp;ofi_layer"
second="tcp;ofi_rxm"

args="-r ${REPEATS:-5}"
[ -n "${ITERS:-}" ] && args="$args -i $ITERS"
[ -n "${WARMUP:-}" ] && args="$args -w $WARMUP"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/coll_compare.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The libfabric the provider is built against, which may not be the one Open MPI was linked
# with; and a sanitizer build of the provider, whose runtime must be loaded first (its figures
# mean little, but the script still runs).
lib_env=
if [ -n "${LAYER_TEST_FABRIC_LIBDIR:-}" ]; then
	LD_LIBRARY_PATH=$LAYER_TEST_FABRIC_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
	lib_env="-x LD_LIBRARY_PATH"
fi
asan_env=
lib=${FI_PROVIDER_PATH:-.}/liblayer-fi.so
asan=$([ -f "$lib" ] && ldd "$lib" | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
	echo "run_coll_compare: note: $lib is a sanitizer build; its figures mean little" >&2
	LD_PRELOAD=$asan ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
	export LD_PRELOAD ASAN_OPTIONS
	asan_env="-x LD_PRELOAD -x ASAN_OPTIONS"
fi

mpi=
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
	if mpicc -O2 -o "$tmp/coll_bench_mpi" "$src/tests/mpi/coll_bench_mpi.c"; then
		mpi=$tmp/coll_bench_mpi
	else
		echo "run_coll_compare: mpicc failed: no MPI column" >&2
	fi
else
	echo "run_coll_compare: no Open MPI (openmpi-bin, libopenmpi-dev): no MPI column" >&2
fi
root=
[ "$(id -u)" -eq 0 ] && root=--allow-run-as-root

# $1: fi_coll_bench -c, $2: coll_bench_mpi -c; one table, rows in order of appearance, the MPI
# figure and its ratio to the first provider added on the right.
merge() {
	awk -F, -v mpi_name="mpi($first)" -v has_mpi="$3" '
	function human(s) {
		if (s == 0) return "-"
		if (s % 1048576 == 0) return s / 1048576 "M"
		if (s % 1024 == 0) return s / 1024 "K"
		return s
	}
	function add(key, t, s) {
		if (key in seen) return
		seen[key] = 1; order[++n] = key; rtest[key] = t; rsize[key] = s
	}
	/^#/ || !NF { next }
	FILENAME == ARGV[1] && $1 == "test" { nh = NF; for (i = 1; i <= NF; i++) h[i] = $i; next }
	FILENAME == ARGV[1] {
		add($1 "," $2, $1, $2)
		for (i = 3; i <= NF; i++) cell[$1 "," $2, i] = $i
		next
	}
	$1 == "test" { next }
	{ add($1 "," $2, $1, $2); mpi[$1 "," $2] = $3 }
	END {
		if (!nh) { nh = 3; h[1] = "test"; h[2] = "size"; h[3] = "(no fi_coll_bench)" }
		short = h[3]; sub(/.*;/, "", short); sub(/^ofi_/, "", short)
		nc = nh
		if (has_mpi) { h[nh + 1] = mpi_name; h[nh + 2] = "mpi/" short; nc = nh + 2 }
		for (c = 1; c <= nc; c++) out[0, c] = h[c]
		for (r = 1; r <= n; r++) {
			k = order[r]
			out[r, 1] = rtest[k]; out[r, 2] = human(rsize[k])
			for (c = 3; c <= nh; c++) out[r, c] = ((k, c) in cell) ? cell[k, c] : "-"
			if (!has_mpi) continue
			m = (k in mpi) ? mpi[k] : "-"
			out[r, nh + 1] = m
			f = out[r, 3]
			if (m ~ /^[0-9.]+$/ && f ~ /^[0-9.]+$/ && f > 0)
				out[r, nh + 2] = sprintf("%.2f", m / f)
			else
				out[r, nh + 2] = "n/a"
		}
		for (r = 0; r <= n; r++)
			for (c = 1; c <= nc; c++)
				if (length(out[r, c]) > w[c]) w[c] = length(out[r, c])
		for (r = 0; r <= n; r++) {
			line = sprintf("%-" w[1] "s", out[r, 1])
			for (c = 2; c <= nc; c++) line = line sprintf("  %" w[c] "s", out[r, c])
			print line
		}
	}' "$1" "$2"
}

[ $# -gt 0 ] || set -- 4 8
status=0
for np in "$@"; do
	echo "== $np ranks =="
	echo "# us per call (the slowest rank's average, median of ${REPEATS:-5} repeats);" \
		"allgather size is per rank; broadcast root is rank 0;" \
		"X/layer: X's figure over layer's (> 1: slower)"
	# shellcheck disable=SC2086 # $args: several options
	timeout "$to" "$bench" -n "$np" $args -c -p "$first" -p "$second" >"$tmp/fab"
	rc=$?
	grep '^#' "$tmp/fab"
	case $rc in
	0) ;;
	1) echo "# fi_coll_bench: some rows failed (their reasons are above)" ;;
	77) echo "# fi_coll_bench: neither provider offers FI_COLLECTIVE" ;;
	*) echo "# fi_coll_bench: exit status $rc"; status=1 ;;
	esac
	: >"$tmp/mpi"
	if [ -n "$mpi" ]; then
		# shellcheck disable=SC2086 # $args, $root, $*_env: several options or none
		timeout "$to" mpirun $root --oversubscribe -np "$np" \
			--map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed \
			--mca mpi_yield_when_idle 1 \
			--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$first" \
			--mca oob_tcp_if_include lo --mca btl self \
			-x FI_TCP_IFACE $prov_env $lib_env $asan_env \
			"$mpi" $args -c >"$tmp/mpi"
		rc=$?
		grep '^#' "$tmp/mpi"
		[ $rc -eq 0 ] || { echo "# mpirun: exit status $rc"; status=1; }
	fi
	merge "$tmp/fab" "$tmp/mpi" "$mpi"
	echo
done
exit $status
