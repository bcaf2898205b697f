#!/bin/sh
# The functional tests of the data path again, over udp;ofi_layer: ofi_layer over the udp
# core's unreliable datagrams, made reliable by its datagram transport (fi_layer(7)), and the
# transport's wire protocol spoken by hand (test_dgram_wire). Skipped (77) when udp is not
# offered on 127.0.0.1.
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="udp;ofi_layer"
export LAYER_TEST_PROV

# shellcheck disable=SC2086 # one word per program
run_suite "over udp;ofi_layer" $rdm_core_tests test_dgram_wire
