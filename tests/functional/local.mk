# Functional tests through the public fi_* API over tcp;ofi_layer on 127.0.0.1.
func_tests =
check_PROGRAMS += $(func_tests)
TESTS += $(func_tests)

# One program per area; each links the shared helpers in common.c.
func_common = tests/functional/common.c tests/functional/common_cq.c tests/functional/common_log.c \
	tests/functional/common.h
func_ldadd = $(FABRIC_LIBS) $(PTHREAD_LIBS)
func_tests += tests/functional/test_getinfo
tests_functional_test_getinfo_SOURCES = tests/functional/test_getinfo.c $(func_common)
tests_functional_test_getinfo_LDADD = $(func_ldadd)
func_tests += tests/functional/test_objects
tests_functional_test_objects_SOURCES = tests/functional/test_objects.c $(func_common)
tests_functional_test_objects_LDADD = $(func_ldadd)
func_tests += tests/functional/test_av
tests_functional_test_av_SOURCES = tests/functional/test_av.c $(func_common)
tests_functional_test_av_LDADD = $(func_ldadd)
func_tests += tests/functional/test_av_event
tests_functional_test_av_event_SOURCES = tests/functional/test_av_event.c $(func_common)
tests_functional_test_av_event_LDADD = $(func_ldadd)
func_tests += tests/functional/test_av_shared
tests_functional_test_av_shared_SOURCES = tests/functional/test_av_shared.c $(func_common)
tests_functional_test_av_shared_LDADD = $(func_ldadd)
func_tests += tests/functional/test_av_auth
tests_functional_test_av_auth_SOURCES = tests/functional/test_av_auth.c $(func_common)
tests_functional_test_av_auth_LDADD = $(func_ldadd)
func_tests += tests/functional/test_auth_data
tests_functional_test_auth_data_SOURCES = tests/functional/test_auth_data.c $(func_common)
tests_functional_test_auth_data_LDADD = $(func_ldadd)
if HAVE_NATIVE_AV_AUTH_KEY
# fi_av(3) 1.20 through libfabric's own declarations (headers of 1.20 and later only).
func_tests += tests/functional/test_av_native
tests_functional_test_av_native_SOURCES = tests/functional/test_av_native.c $(func_common)
tests_functional_test_av_native_LDADD = $(func_ldadd)
endif
EXTRA_DIST += tests/functional/test_av_native.c
func_tests += tests/functional/test_av_sym
tests_functional_test_av_sym_SOURCES = tests/functional/test_av_sym.c $(func_common)
tests_functional_test_av_sym_LDADD = $(func_ldadd)
func_tests += tests/functional/test_av_ep
tests_functional_test_av_ep_SOURCES = tests/functional/test_av_ep.c $(func_common)
tests_functional_test_av_ep_LDADD = $(func_ldadd)
func_tests += tests/functional/test_av_set
tests_functional_test_av_set_SOURCES = tests/functional/test_av_set.c \
	tests/functional/test_av_set_stress.c tests/functional/test_av_set.h $(func_common)
tests_functional_test_av_set_LDADD = $(func_ldadd)
func_tests += tests/functional/test_malformed
tests_functional_test_malformed_SOURCES = tests/functional/test_malformed.c $(func_common)
tests_functional_test_malformed_LDADD = $(func_ldadd)
func_tests += tests/functional/test_ring
tests_functional_test_ring_SOURCES = tests/functional/test_ring.c $(func_common)
tests_functional_test_ring_LDADD = $(func_ldadd)
func_tests += tests/functional/test_ring_life
tests_functional_test_ring_life_SOURCES = tests/functional/test_ring_life.c $(func_common)
tests_functional_test_ring_life_LDADD = $(func_ldadd)
func_tests += tests/functional/test_many_peers
tests_functional_test_many_peers_SOURCES = tests/functional/test_many_peers.c $(func_common)
tests_functional_test_many_peers_LDADD = $(func_ldadd)
func_tests += tests/functional/test_sleep
tests_functional_test_sleep_SOURCES = tests/functional/test_sleep.c $(func_common)
tests_functional_test_sleep_LDADD = $(func_ldadd)
msg_fixture = tests/functional/msg_fixture.c tests/functional/msg_fixture.h
func_tests += tests/functional/test_msg
tests_functional_test_msg_SOURCES = tests/functional/test_msg.c $(msg_fixture) $(func_common)
tests_functional_test_msg_LDADD = $(func_ldadd)
func_tests += tests/functional/test_msg_ep
tests_functional_test_msg_ep_SOURCES = tests/functional/test_msg_ep.c $(msg_fixture) \
	$(func_common)
tests_functional_test_msg_ep_LDADD = $(func_ldadd)
func_tests += tests/functional/test_multi_recv
tests_functional_test_multi_recv_SOURCES = tests/functional/test_multi_recv.c $(func_common)
tests_functional_test_multi_recv_LDADD = $(func_ldadd)
func_tests += tests/functional/test_cancel
tests_functional_test_cancel_SOURCES = tests/functional/test_cancel.c $(func_common)
tests_functional_test_cancel_LDADD = $(func_ldadd)
func_tests += tests/functional/test_threads
tests_functional_test_threads_SOURCES = tests/functional/test_threads.c $(func_common)
tests_functional_test_threads_LDADD = $(func_ldadd)
func_tests += tests/functional/test_domain_threads
tests_functional_test_domain_threads_SOURCES = tests/functional/test_domain_threads.c $(func_common)
tests_functional_test_domain_threads_LDADD = $(func_ldadd)
func_tests += tests/functional/test_bad_input
tests_functional_test_bad_input_SOURCES = tests/functional/test_bad_input.c $(func_common)
tests_functional_test_bad_input_LDADD = $(func_ldadd)
func_tests += tests/functional/test_conns
tests_functional_test_conns_SOURCES = tests/functional/test_conns.c $(func_common)
tests_functional_test_conns_LDADD = $(func_ldadd)
func_tests += tests/functional/test_poll
tests_functional_test_poll_SOURCES = tests/functional/test_poll.c $(func_common)
tests_functional_test_poll_LDADD = $(func_ldadd)
func_tests += tests/functional/test_rma
tests_functional_test_rma_SOURCES = tests/functional/test_rma.c $(func_common)
tests_functional_test_rma_LDADD = $(func_ldadd)
func_tests += tests/functional/test_rma_direct
tests_functional_test_rma_direct_SOURCES = tests/functional/test_rma_direct.c $(func_common)
tests_functional_test_rma_direct_LDADD = $(func_ldadd)
func_tests += tests/functional/test_progress_auto
tests_functional_test_progress_auto_SOURCES = tests/functional/test_progress_auto.c $(func_common)
tests_functional_test_progress_auto_LDADD = $(func_ldadd)
func_tests += tests/functional/test_atomic
tests_functional_test_atomic_SOURCES = tests/functional/test_atomic.c $(func_common)
tests_functional_test_atomic_LDADD = util/libutil.la $(func_ldadd)
func_tests += tests/functional/test_coll
tests_functional_test_coll_SOURCES = tests/functional/test_coll.c tests/functional/test_coll.h \
	tests/functional/test_coll_data.c tests/functional/test_coll_join.c \
	tests/functional/test_coll_more.c $(func_common)
tests_functional_test_coll_LDADD = $(func_ldadd)
func_tests += tests/functional/test_peer_loss
tests_functional_test_peer_loss_SOURCES = tests/functional/test_peer_loss.c $(func_common)
tests_functional_test_peer_loss_LDADD = $(func_ldadd)
func_tests += tests/functional/test_server_port
tests_functional_test_server_port_SOURCES = tests/functional/test_server_port.c $(func_common)
tests_functional_test_server_port_LDADD = $(func_ldadd)
func_tests += tests/functional/test_twoproc
tests_functional_test_twoproc_SOURCES = tests/functional/test_twoproc.c $(func_common)
tests_functional_test_twoproc_LDADD = $(func_ldadd)
# cross-memory attach between processes: both ways, RMA, refusals by the system
func_tests += tests/functional/test_cma
tests_functional_test_cma_SOURCES = tests/functional/test_cma.c $(func_common)
tests_functional_test_cma_LDADD = $(func_ldadd)
func_tests += tests/functional/test_tagged
tests_functional_test_tagged_SOURCES = tests/functional/test_tagged.c $(func_common)
tests_functional_test_tagged_LDADD = $(func_ldadd)
func_tests += tests/functional/test_tagged_threads
tests_functional_test_tagged_threads_SOURCES = tests/functional/test_tagged_threads.c $(func_common)
tests_functional_test_tagged_threads_LDADD = $(func_ldadd)
func_tests += tests/functional/test_unexp
tests_functional_test_unexp_SOURCES = tests/functional/test_unexp.c $(func_common)
tests_functional_test_unexp_LDADD = $(func_ldadd)
func_tests += tests/functional/test_direct
tests_functional_test_direct_SOURCES = tests/functional/test_direct.c $(func_common)
tests_functional_test_direct_LDADD = $(func_ldadd)

# The data-path tests above once more over an RDM core: net (1.17), tcp's RDM endpoint
# (1.18 on); each 77 where its core is missing.
dist_check_SCRIPTS += tests/functional/run_over_net.sh
TESTS += tests/functional/run_over_net.sh
dist_check_SCRIPTS += tests/functional/run_over_tcp_rdm.sh
TESTS += tests/functional/run_over_tcp_rdm.sh

# And over a datagram core, udp, made reliable by the datagram transport, with its wire
# protocol spoken by hand (test_dgram_wire: run there only).
check_PROGRAMS += tests/functional/test_dgram_wire
tests_functional_test_dgram_wire_SOURCES = tests/functional/test_dgram_wire.c $(func_common)
tests_functional_test_dgram_wire_LDADD = $(func_ldadd)
dist_check_SCRIPTS += tests/functional/run_over_udp.sh
TESTS += tests/functional/run_over_udp.sh
EXTRA_DIST += tests/functional/lsan_net.supp tests/functional/run_suite.sh

# The same over tcp with bounce buffers instead of direct receive (fi_layer(7)).
dist_check_SCRIPTS += tests/functional/run_bounce.sh
TESTS += tests/functional/run_bounce.sh
# Incast with the fewest shared receive buffers (core/core_msg_cq.c).
dist_check_SCRIPTS += tests/functional/run_few_buffers.sh
TESTS += tests/functional/run_few_buffers.sh
dist_check_SCRIPTS += tests/functional/run_auto_progress.sh
TESTS += tests/functional/run_auto_progress.sh

# The data path with rings of one slot, and without rings (core/ring.h).
dist_check_SCRIPTS += tests/functional/run_ring.sh
TESTS += tests/functional/run_ring.sh
dist_check_SCRIPTS += tests/functional/run_rma_paths.sh
TESTS += tests/functional/run_rma_paths.sh
dist_check_SCRIPTS += tests/functional/run_without_cma.sh
TESTS += tests/functional/run_without_cma.sh

# libfabric's own fi_pingpong between two processes over ofi_layer; 77 without libfabric-bin.
dist_check_SCRIPTS += tests/functional/run_fi_pingpong.sh
TESTS += tests/functional/run_fi_pingpong.sh

# Real packet loss and partitions (nftables in a network namespace of its own): test_loss is
# run by run_loss.sh only, over udp;ofi_layer and tcp;ofi_layer; 77 unless root with ip and nft
# (iproute2, nftables).
check_PROGRAMS += tests/functional/test_loss
tests_functional_test_loss_SOURCES = tests/functional/test_loss.c \
	tests/functional/test_loss_silent.c tests/functional/test_loss.h $(func_common)
tests_functional_test_loss_LDADD = $(func_ldadd)
dist_check_SCRIPTS += tests/functional/run_loss.sh
TESTS += tests/functional/run_loss.sh
