#!/bin/sh
# The data path's large transfers through the core again: endpoints of one process, and
# processes of one host, reach each other by cross-memory attach, which carries RMA data,
# large messages and atomic operands (FI_OFI_LAYER_CMA_SIZE, _CMA_MSG_SIZE, fi_layer(7)). With
# it off,
# rendezvous and RMA go through the core's RMA (tcp, net) or the datagram transport's streams
# (udp), as between hosts.
set -u
. "$(dirname "$0")/run_suite.sh"
FI_OFI_LAYER_CMA_SIZE=0
FI_NET_IFACE=${FI_NET_IFACE:-lo}
export FI_OFI_LAYER_CMA_SIZE FI_NET_IFACE
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_net.supp:print_suppressions=0"
export LSAN_OPTIONS

status=0
for prov in "tcp;ofi_layer" "net;ofi_layer" "udp;ofi_layer"; do
	LAYER_TEST_PROV=$prov
	export LAYER_TEST_PROV
	(run_suite "$prov without cross-memory attach" test_msg test_msg_ep test_tagged \
		test_multi_recv test_unexp test_rma test_atomic test_coll test_cma \
		test_progress_auto)
	case $? in
	0 | 77) ;;
	*) status=1 ;;
	esac
done
# RMA by cross-memory attach, messages through the core
(
	FI_OFI_LAYER_CMA_SIZE=16384 FI_OFI_LAYER_CMA_MSG_SIZE=0 LAYER_TEST_PROV="tcp;ofi_layer"
	export FI_OFI_LAYER_CMA_SIZE FI_OFI_LAYER_CMA_MSG_SIZE LAYER_TEST_PROV
	run_suite "tcp;ofi_layer, messages without cross-memory attach" test_cma test_rma
)
case $? in
0 | 77) ;;
*) status=1 ;;
esac
exit $status
