# Functional tests through the public fi_* API over tcp;ofi_layer on 127.0.0.1.
func_tests =
check_PROGRAMS += $(func_tests)
TESTS += $(func_tests)
