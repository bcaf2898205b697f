# Functional tests through the public fi_* API over tcp;ofi_layer on 127.0.0.1.
func_tests =
check_PROGRAMS += $(func_tests)
TESTS += $(func_tests)

# One program per area; each links the shared helpers in common.c.
func_common = tests/functional/common.c tests/functional/common.h
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
func_tests += tests/functional/test_malformed
tests_functional_test_malformed_SOURCES = tests/functional/test_malformed.c
tests_functional_test_malformed_LDADD = $(FABRIC_LIBS)
func_tests += tests/functional/test_msg
tests_functional_test_msg_SOURCES = tests/functional/test_msg.c $(func_common)
tests_functional_test_msg_LDADD = $(func_ldadd)
func_tests += tests/functional/test_multi_recv
tests_functional_test_multi_recv_SOURCES = tests/functional/test_multi_recv.c $(func_common)
tests_functional_test_multi_recv_LDADD = $(func_ldadd)
func_tests += tests/functional/test_cancel
tests_functional_test_cancel_SOURCES = tests/functional/test_cancel.c $(func_common)
tests_functional_test_cancel_LDADD = $(func_ldadd)
func_tests += tests/functional/test_threads
tests_functional_test_threads_SOURCES = tests/functional/test_threads.c $(func_common)
tests_functional_test_threads_LDADD = $(func_ldadd)
func_tests += tests/functional/test_bad_input
tests_functional_test_bad_input_SOURCES = tests/functional/test_bad_input.c $(func_common)
tests_functional_test_bad_input_LDADD = $(func_ldadd)
func_tests += tests/functional/test_peer_loss
tests_functional_test_peer_loss_SOURCES = tests/functional/test_peer_loss.c $(func_common)
tests_functional_test_peer_loss_LDADD = $(func_ldadd)
