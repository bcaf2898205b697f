# Provider-independent building blocks; never include layer/ headers from here.
noinst_LTLIBRARIES += util/libutil.la
util_libutil_la_SOURCES = \
	util/util.h util/util.c util/list.h util/lock.h \
	util/wait.h util/wait.c \
	util/cq.h util/cq.c \
	util/eq.h util/eq.c \
	util/cntr.h util/cntr.c \
	util/bufpool.h util/bufpool.c \
	util/progress.h util/progress.c \
	util/poll.h util/poll.c \
	util/mr_cache.h util/mr_cache.c util/mr_map.h util/mr_map.c util/rel.h util/rel.c \
	util/atomic.h util/atomic.c \
	util/coll_sched.h util/coll_sched.c \
	util/av_table.h util/av_table_int.h util/av_table.c util/av_table_find.c \
	util/av_set.h util/av_set.c \
	util/cma.h util/cma.c \
	util/tagm.h util/tagm_inl.h util/tagm.c
util_libutil_la_LIBADD = $(FABRIC_LIBS) $(PTHREAD_LIBS)
