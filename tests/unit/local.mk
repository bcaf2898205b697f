# cmocka unit tests of util/. Each test_x.c is one program; add it to unit_tests.
unit_tests =
unit_ldadd = util/libutil.la $(CMOCKA_LIBS) $(FABRIC_LIBS) $(PTHREAD_LIBS)
unit_cflags = $(AM_CFLAGS) $(CMOCKA_CFLAGS)

unit_tests += tests/unit/test_av_table
tests_unit_test_av_table_LDADD = $(unit_ldadd)
tests_unit_test_av_table_CFLAGS = $(unit_cflags)

if HAVE_CMOCKA
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)
endif
