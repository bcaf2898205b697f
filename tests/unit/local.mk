# cmocka unit tests of util/. Each test_x.c is one program; add it to unit_tests.
unit_tests =
unit_ldadd = util/libutil.la $(CMOCKA_LIBS) $(FABRIC_LIBS) $(PTHREAD_LIBS)
unit_cflags = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
noinst_HEADERS += tests/unit/unit_fd.h tests/unit/tagm_fixture.h tests/unit/av_table_fixture.h

# util/ objects: lists, buffer pools, wait sets, CQ, EQ, counters.
unit_tests += tests/unit/test_list tests/unit/test_bufpool tests/unit/test_wait \
	tests/unit/test_cq tests/unit/test_eq tests/unit/test_cntr
tests_unit_test_list_LDADD = $(unit_ldadd)
tests_unit_test_list_CFLAGS = $(unit_cflags)
tests_unit_test_bufpool_LDADD = $(unit_ldadd)
tests_unit_test_bufpool_CFLAGS = $(unit_cflags)
tests_unit_test_wait_LDADD = $(unit_ldadd)
tests_unit_test_wait_CFLAGS = $(unit_cflags)
tests_unit_test_cq_LDADD = $(unit_ldadd)
tests_unit_test_cq_CFLAGS = $(unit_cflags)
# allocation failures on demand (test_overrun_when_memory_runs_out)
tests_unit_test_cq_LDFLAGS = -Wl,--wrap=malloc
tests_unit_test_eq_LDADD = $(unit_ldadd)
tests_unit_test_eq_CFLAGS = $(unit_cflags)
tests_unit_test_cntr_LDADD = $(unit_ldadd)
tests_unit_test_cntr_CFLAGS = $(unit_cflags)

unit_tests += tests/unit/test_progress tests/unit/test_mr_cache
tests_unit_test_progress_LDADD = $(unit_ldadd)
tests_unit_test_progress_CFLAGS = $(unit_cflags)
tests_unit_test_mr_cache_LDADD = $(unit_ldadd)
tests_unit_test_mr_cache_CFLAGS = $(unit_cflags)

unit_tests += tests/unit/test_av_table
tests_unit_test_av_table_LDADD = $(unit_ldadd)
tests_unit_test_av_table_CFLAGS = $(unit_cflags)
unit_tests += tests/unit/test_av_table_random
tests_unit_test_av_table_random_LDADD = $(unit_ldadd)
tests_unit_test_av_table_random_CFLAGS = $(unit_cflags)

unit_tests += tests/unit/test_tagm
tests_unit_test_tagm_LDADD = $(unit_ldadd)
tests_unit_test_tagm_CFLAGS = $(unit_cflags)
unit_tests += tests/unit/test_tagm_model
tests_unit_test_tagm_model_LDADD = $(unit_ldadd)
tests_unit_test_tagm_model_CFLAGS = $(unit_cflags)

unit_tests += tests/unit/test_av_set
tests_unit_test_av_set_LDADD = $(unit_ldadd)
tests_unit_test_av_set_CFLAGS = $(unit_cflags)
# allocation failures are injected into util's calls only
tests_unit_test_av_set_LDFLAGS = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc

unit_tests += tests/unit/test_poll
tests_unit_test_poll_LDADD = $(unit_ldadd)
tests_unit_test_poll_CFLAGS = $(unit_cflags)

unit_tests += tests/unit/test_mr_map
tests_unit_test_mr_map_LDADD = $(unit_ldadd)
tests_unit_test_mr_map_CFLAGS = $(unit_cflags)

unit_tests += tests/unit/test_atomic
tests_unit_test_atomic_LDADD = $(unit_ldadd)
tests_unit_test_atomic_CFLAGS = $(unit_cflags)

# util/coll_sched: every collective's schedules run by a simulator, groups of 1 to 64.
unit_tests += tests/unit/test_coll_sched
tests_unit_test_coll_sched_LDADD = $(unit_ldadd)
tests_unit_test_coll_sched_CFLAGS = $(unit_cflags)

# util/rel: sequence numbers, acknowledgements, round trips and the congestion window.
unit_tests += tests/unit/test_rel
tests_unit_test_rel_LDADD = $(unit_ldadd)
tests_unit_test_rel_CFLAGS = $(unit_cflags)

# util/cma: identities, reachability, copies out of a child's memory.
unit_tests += tests/unit/test_cma
tests_unit_test_cma_LDADD = $(unit_ldadd)
tests_unit_test_cma_CFLAGS = $(unit_cflags)

if HAVE_CMOCKA
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)
endif
