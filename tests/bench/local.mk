# Benchmarks: ofi_layer side by side with other providers; never run by make check.
bin_PROGRAMS += fi_layer_bench
fi_layer_bench_SOURCES = tests/bench/fi_layer_bench.c tests/bench/bench_peer.c \
	tests/bench/bench_fab.c tests/bench/bench_xfer.c tests/bench/bench.h \
	tests/bench/bench_util.c tests/bench/bench_util.h
fi_layer_bench_LDADD = $(FABRIC_LIBS)
# fi_collective(3) among N ranks on this host, providers side by side (installed).
bin_PROGRAMS += fi_coll_bench
fi_coll_bench_SOURCES = tests/bench/fi_coll_bench.c tests/bench/coll_bench_rank.c \
	tests/bench/coll_bench.h tests/bench/bench_util.c tests/bench/bench_util.h
fi_coll_bench_LDADD = $(FABRIC_LIBS)
# One server endpoint and N peers: connection time, memory and fds per peer, latency beside the
# idle ones, and churn (installed).
bin_PROGRAMS += fi_scale_bench
fi_scale_bench_SOURCES = tests/bench/fi_scale_bench.c tests/bench/scale_bench_procs.c \
	tests/bench/scale_bench_report.c tests/bench/scale_bench_fab.c \
	tests/bench/scale_bench_server.c tests/bench/scale_bench_client.c \
	tests/bench/scale_bench.h tests/bench/bench_util.c tests/bench/bench_util.h
fi_scale_bench_LDADD = $(FABRIC_LIBS)
# What a target that never calls libfabric costs its peers under FI_PROGRESS_AUTO (installed).
bin_PROGRAMS += fi_progress_bench
fi_progress_bench_SOURCES = tests/bench/fi_progress_bench.c tests/bench/bench_util.c \
	tests/bench/bench_util.h
fi_progress_bench_LDADD = $(FABRIC_LIBS)
# fi_coll_bench beside Open MPI's collectives (tests/mpi/coll_bench_mpi.c); run by hand only.
EXTRA_DIST += tests/bench/run_coll_compare.sh
# AV set operations for large groups; it also times util/av_set alone, hence libutil.
noinst_PROGRAMS += fi_av_set_bench
fi_av_set_bench_SOURCES = tests/bench/fi_av_set_bench.c tests/bench/bench_util.c \
	tests/bench/bench_util.h
fi_av_set_bench_LDADD = util/libutil.la $(FABRIC_LIBS)
# The tag-matching engine (util/tagm) alone, without a network.
noinst_PROGRAMS += tagm_bench
tagm_bench_SOURCES = tests/bench/tagm_bench.c
tagm_bench_LDADD = util/libutil.la $(FABRIC_LIBS)
# Address vectors: insert, lookup both ways and remove a million entries, beside other providers.
noinst_PROGRAMS += fi_av_bench
fi_av_bench_SOURCES = tests/bench/fi_av_bench.c
fi_av_bench_LDADD = $(FABRIC_LIBS)
# fi_av_conform(1): fi_av(3) clause by clause against any provider (installed).
bin_PROGRAMS += fi_av_conform
fi_av_conform_SOURCES = tests/conform/fi_av_conform.c tests/conform/av_clauses.c \
	tests/conform/av_clauses_ext.c \
	tests/conform/conform.h
fi_av_conform_LDADD = $(FABRIC_LIBS)
# Smoke tests of fi_layer_bench in both set-ups, fi_coll_bench and fi_scale_bench (make check
# runs them; they measure nothing).
dist_check_SCRIPTS += tests/bench/run_bench_smoke.sh
TESTS += tests/bench/run_bench_smoke.sh
