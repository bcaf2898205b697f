# Benchmarks: ofi_layer side by side with other providers; never run by make check.
