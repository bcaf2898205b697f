#!/bin/sh
# fi_layer_bench runs, a smoke test and not a measurement: a few round trips of every latency
# and bandwidth row over tcp;ofi_layer, with the benchmark's own set-up and with --fabtests
# (separate CQs, fi_inject, the server learning the client from its first message). Fails when
# a row shows "fail" or "-" instead of a number; the figures themselves are not looked at.
# Then fi_coll_bench: two calls of every collective row with 2 ranks over tcp;ofi_layer, which
# must exit 0; its exit status 77 (the provider offers no FI_COLLECTIVE) counts as a skip.
# Then fi_scale_bench over tcp;ofi_layer: 1 and 8 peers, and two churn cycles of 8 peers; every
# row must be there with figures (a cell saying fail or n/a fails the test).
set -u
bench=${LAYER_TEST_BUILDDIR:-.}/fi_layer_bench
[ -x "$bench" ] || { echo "FAIL: $bench not built"; exit 1; }
status=0
for mode in "" --fabtests; do
	out=$("$bench" -p "tcp;ofi_layer" -r 1 -i 50 -s 8,4k,256k -T --no-match --csv --no-pin \
		-t 60 $mode 2>&1)
	rc=$?
	rows=$(printf '%s\n' "$out" | grep -cE '^(msg|tag)_(lat|bw)')
	bad=$(printf '%s\n' "$out" | grep -E '^(msg|tag)_(lat|bw)' | grep -cE ',(fail|-|n/a)(,|$)')
	if [ $rc -ne 0 ] || [ "$rows" -ne 12 ] || [ "$bad" -ne 0 ]; then
		echo "FAIL fi_layer_bench ${mode:-(own set-up)}: exit $rc, $rows rows, $bad without a figure"
		printf '%s\n' "$out" | tail -20
		status=1
	else
		echo "ok   fi_layer_bench ${mode:-(own set-up)}: $rows rows"
	fi
done

coll=${LAYER_TEST_BUILDDIR:-.}/fi_coll_bench
[ -x "$coll" ] || { echo "FAIL: $coll not built"; exit 1; }
out=$("$coll" -n 2 -i 2 -w 1 -r 1 -T 30 -p "tcp;ofi_layer" 2>&1)
rc=$?
case $rc in
0) echo "ok   fi_coll_bench: 2 ranks, every row" ;;
77) echo "skip fi_coll_bench: tcp;ofi_layer offers no FI_COLLECTIVE" ;;
*)
	echo "FAIL fi_coll_bench: exit $rc"
	printf '%s\n' "$out" | tail -20
	status=1
	;;
esac

scale=${LAYER_TEST_BUILDDIR:-.}/fi_scale_bench
[ -x "$scale" ] || { echo "FAIL: $scale not built"; exit 1; }
# the arguments, then the rows expected: N = 1 and 8; the baseline and two cycles
for run in "2 -n 1,8 -r 1 -i 200" "3 -n 8 --churn 2"; do
	want=${run%% *}
	args=${run#* }
	out=$("$scale" -p "tcp;ofi_layer" $args --csv --no-pin -t 60 2>&1)
	rc=$?
	rows=$(printf '%s\n' "$out" | grep -v '^#' | grep -c ',tcp;ofi_layer,\|^tcp;ofi_layer,')
	bad=$(printf '%s\n' "$out" | grep -v '^#' | grep -c 'fail\|n/a')
	if [ $rc -ne 0 ] || [ "$rows" -ne "$want" ] || [ "$bad" -ne 0 ]; then
		echo "FAIL fi_scale_bench $args: exit $rc, $rows rows of $want, $bad failed"
		printf '%s\n' "$out" | tail -20
		status=1
	else
		echo "ok   fi_scale_bench $args: $rows rows"
	fi
done
exit $status
