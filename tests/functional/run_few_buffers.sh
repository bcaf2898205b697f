#!/bin/sh
# Incast onto one endpoint with the fewest shared receive buffers (FI_OFI_LAYER_RX_BUF_CNT=4),
# with direct receive and with bounce buffers: hundreds of peers (test_many_peers) and 64
# ranks' collectives (test_coll) send to one endpoint at once, so tcp runs out of buffers
# over and over, and holds messages on connections whose sockets no longer show them. Every
# message must still arrive at once, not when later traffic happens to wake its connection
# (fi_layer(7), Progress).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
FI_OFI_LAYER_RX_BUF_CNT=4
export LAYER_TEST_PROV FI_OFI_LAYER_RX_BUF_CNT
status=0
for direct in 1 0; do
	(
		FI_OFI_LAYER_DIRECT_RECV=$direct
		export FI_OFI_LAYER_DIRECT_RECV
		run_suite "tcp;ofi_layer with 4 shared buffers, direct receive $direct" \
			test_many_peers test_coll
	)
	case $? in
	0 | 77) ;;
	*) status=1 ;;
	esac
done
exit $status
