# Benchmarks: ofi_layer side by side with other providers; never run by make check.
bin_PROGRAMS += fi_layer_bench
fi_layer_bench_SOURCES = tests/bench/fi_layer_bench.c
fi_layer_bench_LDADD = $(FABRIC_LIBS)
