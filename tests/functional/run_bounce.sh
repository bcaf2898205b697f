#!/bin/sh
# The functional tests of the data path again over tcp;ofi_layer with bounce buffers
# (FI_OFI_LAYER_DIRECT_RECV=0): the path every core without direct receive takes, and the
# one tcp falls back to on libfabric other than 1.17 (fi_layer(7)).
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
FI_OFI_LAYER_DIRECT_RECV=0
export LAYER_TEST_PROV FI_OFI_LAYER_DIRECT_RECV

# First with buffers that take the inject size only (the handshake says 0 KiB): RMA and
# atomics beyond it go by the core's RMA read, and so does nearly every collective's data.
(
	FI_OFI_LAYER_EAGER_SIZE=0
	export FI_OFI_LAYER_EAGER_SIZE
	run_suite "tcp;ofi_layer with the smallest bounce buffers" test_rma test_atomic test_coll
)
case $? in
0 | 77) ;;
*) exit 1 ;;
esac
run_suite "tcp;ofi_layer with bounce buffers" test_msg test_msg_ep test_tagged test_multi_recv \
	test_cancel test_twoproc test_threads test_tagged_threads test_malformed \
	test_auth_data test_unexp test_peer_loss test_direct test_rma test_atomic test_coll
