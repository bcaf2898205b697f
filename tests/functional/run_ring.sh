#!/bin/sh
# The data path's tests over tcp;ofi_layer with rings (FI_OFI_LAYER_RING_ACTIVE=64: on by
# default over libfabric 1.17 only) that every connection earns with its first message
# (FI_OFI_LAYER_RING_EARN=1), of one slot (FI_OFI_LAYER_RING_SLOTS=1: nearly
# every other message waits for the peer to say it took the last slot and goes as a message,
# so slots and messages interleave on every connection); with rings given back after a
# millisecond unused and earned again at once (FI_OFI_LAYER_RING_IDLE=1: rings come and go
# all through the tests, between any two messages); with two rings at most per endpoint
# (most offers refused); and with none at all (every message goes as a message, the path of
# cores without rings).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
FI_OFI_LAYER_RING_EARN=1
FI_OFI_LAYER_RING_ACTIVE=64
export LAYER_TEST_PROV FI_OFI_LAYER_RING_EARN FI_OFI_LAYER_RING_ACTIVE

(
	FI_OFI_LAYER_RING_SLOTS=1
	export FI_OFI_LAYER_RING_SLOTS
	run_suite "tcp;ofi_layer with one-slot rings" test_ring test_sleep test_msg test_msg_ep \
		test_tagged test_multi_recv test_unexp test_direct test_twoproc test_rma test_atomic test_coll
)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
(
	FI_OFI_LAYER_RING_IDLE=1
	export FI_OFI_LAYER_RING_IDLE
	run_suite "tcp;ofi_layer with rings that come and go" test_ring_life test_msg \
		test_tagged test_unexp test_twoproc test_rma test_atomic test_coll
)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
(
	FI_OFI_LAYER_RING_ACTIVE=2
	export FI_OFI_LAYER_RING_ACTIVE
	run_suite "tcp;ofi_layer with two rings at most" test_many_peers test_coll test_conns
)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
FI_OFI_LAYER_RING_SLOTS=0
export FI_OFI_LAYER_RING_SLOTS
run_suite "tcp;ofi_layer without rings" test_ring test_msg test_msg_ep test_tagged test_direct \
	test_rma test_atomic test_coll
