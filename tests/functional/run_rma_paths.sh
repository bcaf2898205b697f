#!/bin/sh
# RMA over tcp;ofi_layer with every request carried as a message (FI_OFI_LAYER_DIRECT_RMA=0:
# no grants, the path of RDM and datagram cores and of the first request for a region), and
# with one-slot rings under direct RMA (grants and requests interleave with ring slots).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
export LAYER_TEST_PROV

(
	FI_OFI_LAYER_DIRECT_RMA=0
	export FI_OFI_LAYER_DIRECT_RMA
	run_suite "tcp;ofi_layer, RMA as messages" test_rma test_rma_direct test_atomic
)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
FI_OFI_LAYER_RING_SLOTS=1
export FI_OFI_LAYER_RING_SLOTS
run_suite "tcp;ofi_layer, direct RMA with one-slot rings" test_rma_direct
