# The provider: liblayer-fi.so, exporting only fi_prov_ini. The endpoint is a stack of one
# folder per layer (layer/ep/ep.h draws it): ep/ (API), proto/ (transmit and receive paths),
# conn/ (connections and peers), core/ (core adapters), dgram/ (the reliable transport a
# datagram core runs under the RDM adapter); beside proto/, rma/, atomic/, coll/
# (collectives) and cma/ (cross-memory attach to peers on the host).
pkglibdir = $(libdir)/libfabric
pkglib_LTLIBRARIES = liblayer-fi.la
liblayer_fi_la_SOURCES = \
	layer/layer.h layer/init.c layer/getinfo.c layer/nosys.h layer/nosys.c \
	layer/fabric.h layer/fabric.c layer/domain.h layer/domain.c layer/mr.h layer/mr.c \
	layer/addr.h layer/addr.c \
	layer/cq.h layer/cq.c layer/cntr.h layer/cntr.c layer/eq.h layer/eq.c layer/poll.h layer/poll.c \
	layer/progress.h layer/progress.c \
	layer/av/av.h layer/av/av.c layer/av/av_insert.c layer/av/av_event.c \
	layer/av/av_auth.c layer/av/av_shm.c layer/av/av_set.h layer/av/av_set.c \
	layer/ep/ep.h layer/ep/ep.c layer/ep/msg.c layer/ep/tagged.c layer/ep/rma.c \
	layer/ep/atomic.c layer/ep/coll.c \
	layer/coll/coll.h layer/coll/coll.c layer/coll/group.c \
	layer/rma/rma.h layer/rma/rma.c layer/rma/rma_target.c layer/rma/grant.h layer/rma/grant.c \
	layer/cma/cma.h layer/cma/cma.c \
	layer/atomic/atomic.h layer/atomic/atomic.c layer/atomic/atomic_target.c \
	layer/proto/proto.h layer/proto/proto.c layer/proto/tx.h layer/proto/tx.c \
	layer/proto/rndv.h layer/proto/rndv.c layer/proto/rx.h layer/proto/rx.c \
	layer/proto/rxq.h layer/proto/rxq.c layer/proto/unexp.h layer/proto/unexp.c \
	layer/conn/conn.h layer/conn/conn.c layer/conn/auth.h layer/conn/auth.c \
	layer/conn/liveness.c \
	layer/core/core.h layer/core/core.c layer/core/wire.h layer/core/wire.c \
	layer/core/core_msg.h layer/core/core_msg.c layer/core/core_msg_rx.c \
	layer/core/core_msg_cq.c \
	layer/core/core_rdm.h layer/core/core_rdm.c \
	layer/core/core_rdm_hello.c layer/core/ring.h layer/core/ring.c \
	layer/dgram/dgram.h layer/dgram/dgram_int.h layer/dgram/dgram_wire.h \
	layer/dgram/dgram.c layer/dgram/rel.c layer/dgram/stream.c
liblayer_fi_la_LIBADD = util/libutil.la $(FABRIC_LIBS) $(PTHREAD_LIBS)
liblayer_fi_la_LDFLAGS = -module -avoid-version -shared -export-symbols-regex '^fi_prov_ini$$'
