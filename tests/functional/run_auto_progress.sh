#!/bin/sh
# The functional tests of the data path again with a progress thread in every domain
# (FI_OFI_LAYER_PROGRESS=auto: FI_PROGRESS_AUTO whenever the hints leave progress open), over
# tcp;ofi_layer: every endpoint is then progressed by its application's calls and by the
# thread at once, under the locks the thread imposes on every threading model. Programs
# that check what manual progress does (the slots test_ring keeps and writes) ask for it.
set -u
. "$(dirname "$0")/run_suite.sh"
LAYER_TEST_PROV="tcp;ofi_layer"
FI_OFI_LAYER_PROGRESS=auto
export LAYER_TEST_PROV FI_OFI_LAYER_PROGRESS

# shellcheck disable=SC2086 # one word per program
run_suite "tcp;ofi_layer with FI_PROGRESS_AUTO" $rdm_core_tests test_many_peers
