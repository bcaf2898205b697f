#!/bin/sh
# The collective tests over tcp;ofi_layer with rings of one slot (FI_OFI_LAYER_RING_SLOTS=1:
# a message waits for the peer to say it took the last one, so rings and messages mix and
# arrive in any order) and with none at all (every collective message goes as a message).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
export LAYER_TEST_PROV

(
	FI_OFI_LAYER_RING_SLOTS=1
	export FI_OFI_LAYER_RING_SLOTS
	run_suite "tcp;ofi_layer with one-slot rings" test_ring test_coll
)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
FI_OFI_LAYER_RING_SLOTS=0
export FI_OFI_LAYER_RING_SLOTS
run_suite "tcp;ofi_layer without rings" test_ring test_coll
