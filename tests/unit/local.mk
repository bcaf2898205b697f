# cmocka unit tests of util/. Each test_x.c is one program; add it to unit_tests.
unit_tests =
unit_ldadd = util/libutil.la $(CMOCKA_LIBS) $(FABRIC_LIBS) $(PTHREAD_LIBS)
unit_cflags = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
if HAVE_CMOCKA
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)
endif
