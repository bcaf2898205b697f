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
