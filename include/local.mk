# Public extension header (installed).
rdmaincludedir = $(includedir)/rdma
rdmainclude_HEADERS = include/rdma/fi_ext_layer.h
