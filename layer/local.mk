# The provider: liblayer-fi.so, exporting only fi_prov_ini.
pkglibdir = $(libdir)/libfabric
pkglib_LTLIBRARIES = liblayer-fi.la
liblayer_fi_la_SOURCES = \
	layer/layer.h layer/init.c layer/getinfo.c layer/fabric.c layer/domain.c \
	layer/av.h layer/av.c layer/av_insert.c layer/av_event.c layer/av_auth.c layer/av_shm.c \
	layer/av_set.h layer/av_set.c \
	layer/cq.c layer/eq.c \
	layer/ep.h layer/ep.c layer/auth.c layer/conn.c layer/conn_msg.c layer/conn_rdm.c \
	layer/msg.c layer/tagged.c layer/nosys.c \
	layer/proto.h layer/proto.c layer/proto_rndv.c layer/unexp.c
liblayer_fi_la_LIBADD = util/libutil.la $(FABRIC_LIBS) $(PTHREAD_LIBS)
liblayer_fi_la_LDFLAGS = -module -avoid-version -shared -export-symbols-regex '^fi_prov_ini$$'
