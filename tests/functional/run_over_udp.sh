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
(run_suite "over udp;ofi_layer" $rdm_core_tests test_dgram_wire)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
# Many peers over one udp socket: as many as its receive buffer holds the answers of at once
# (fi_layer(7) LIMITATIONS: an incast past it is recovered only by senders that progress).
LAYER_TEST_PEERS=128
export LAYER_TEST_PEERS
run_suite "many peers over udp;ofi_layer" test_many_peers
