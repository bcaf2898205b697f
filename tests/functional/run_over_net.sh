#!/bin/sh
# The functional tests of the data path again, over net;ofi_layer: ofi_layer over the net
# core's reliable-datagram (RDM) endpoints instead of tcp's connected ones. Each program
# takes the provider from LAYER_TEST_PROV; one that finds nothing to run over exits 77.
# Skipped (77) when net is not offered on 127.0.0.1.
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="net;ofi_layer"
# net picks its interfaces itself: keep it on loopback, where the tests' addresses are.
FI_NET_IFACE=${FI_NET_IFACE:-lo}
export LAYER_TEST_PROV FI_NET_IFACE
# Sanitizer builds: the leaks of net itself are not ours (see the file).
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_net.supp:print_suppressions=0"
export LSAN_OPTIONS

# test_peer_loss is left out: it skips itself over an RDM core (no lost peer is reported).
run_suite "over net;ofi_layer" test_getinfo test_msg test_tagged test_multi_recv test_cancel \
	test_twoproc test_threads test_domain_threads test_tagged_threads test_av_ep \
	test_bad_input test_malformed test_objects test_auth_data test_server_port test_unexp \
	test_direct test_conns test_poll test_rma test_atomic
