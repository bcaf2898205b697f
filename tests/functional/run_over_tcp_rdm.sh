#!/bin/sh
# The functional tests of the data path again, over tcp's own reliable-datagram (RDM)
# endpoints, which libfabric has from 1.18 on (the former net core): ofi_layer over them
# instead of tcp's connected ones, as FI_OFI_LAYER_CORE_EP_TYPE=rdm asks. Skipped (77) when
# tcp has no RDM endpoint (libfabric 1.17: run_over_net.sh covers that core there).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
FI_OFI_LAYER_CORE_EP_TYPE=rdm
# tcp picks its interfaces itself: keep it on loopback, where the tests' addresses are.
FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
export LAYER_TEST_PROV FI_OFI_LAYER_CORE_EP_TYPE FI_TCP_IFACE
# Sanitizer builds: the same leaks of the core as over net (see the file).
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_net.supp:print_suppressions=0"
export LSAN_OPTIONS

# shellcheck disable=SC2086 # one word per program
run_suite "over tcp's RDM endpoint" $rdm_core_tests test_many_peers
