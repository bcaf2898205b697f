#!/bin/sh
# The functional tests of the data path again, over net;ofi_layer: ofi_layer over the net
# core's reliable-datagram (RDM) endpoints instead of tcp's connected ones. Each program
# takes the provider from LAYER_TEST_PROV; one that finds nothing to run over exits 77.
# Skipped (77) when net is not offered on 127.0.0.1 (libfabric 1.18 made it tcp's RDM
# endpoint: run_over_tcp_rdm.sh).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="net;ofi_layer"
# net picks its interfaces itself: keep it on loopback, where the tests' addresses are.
FI_NET_IFACE=${FI_NET_IFACE:-lo}
export LAYER_TEST_PROV FI_NET_IFACE
# Sanitizer builds: the leaks of net itself are not ours (see the file).
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_net.supp:print_suppressions=0"
export LSAN_OPTIONS

# shellcheck disable=SC2086 # one word per program
run_suite "over net;ofi_layer" $rdm_core_tests test_many_peers
