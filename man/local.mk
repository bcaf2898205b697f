dist_man7_MANS = man/fi_layer.7
dist_man1_MANS = man/fi_layer_bench.1 man/fi_av_conform.1 man/fi_coll_bench.1 \
	man/fi_scale_bench.1 man/fi_progress_bench.1
