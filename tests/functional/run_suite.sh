# Sourced by the run_*.sh variants of the functional suite: run_suite LABEL TEST... runs each
# program under the environment the caller set, prints one line per program, and exits as
# automake's test driver wants (1 if one failed, 77 if none ran).
bin=${LAYER_TEST_BUILDDIR:-.}/tests/functional

run_suite() {
	label=$1
	shift
	pass=0 fail=0 skip=0
	for t in "$@"; do
		log=$(mktemp) || exit 99
		timeout 300 "$bin/$t" >"$log" 2>&1
		rc=$?
		case $rc in
		0)
			echo "PASS: $t ($(tail -n 1 "$log"))"
			pass=$((pass + 1)) ;;
		77)
			echo "SKIP: $t ($(grep -m 1 -i 'skip' "$log"))"
			skip=$((skip + 1)) ;;
		*)
			echo "FAIL: $t (exit status $rc)"
			grep -E '^FAIL' "$log"
			tail -n 1 "$log"
			fail=$((fail + 1)) ;;
		esac
		rm -f "$log"
	done
	echo "$label: $pass passed, $fail failed, $skip skipped"
	[ $fail -eq 0 ] || exit 1
	[ $pass -gt 0 ] || exit 77
	exit 0
}

# The programs of the data path, run again over each reliable-datagram (RDM) core.
rdm_core_tests="test_getinfo test_msg test_msg_ep test_tagged test_multi_recv test_cancel
	test_twoproc test_threads test_domain_threads test_tagged_threads test_av_ep test_bad_input
	test_malformed test_objects test_auth_data test_server_port test_unexp test_direct
	test_conns test_poll test_rma test_rma_direct test_atomic test_coll test_peer_loss test_cma
	test_ring_life test_progress_auto"
