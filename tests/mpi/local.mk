# Open MPI's ofi MTL over tcp;ofi_layer (skipped without Open MPI).
dist_check_SCRIPTS += tests/mpi/test_ompi.sh
TESTS += tests/mpi/test_ompi.sh
EXTRA_DIST += tests/mpi/mpi_probe.c
CLEANFILES += tests/mpi/mpi_probe
# The MPI side of tests/bench/run_coll_compare.sh, which builds it with mpicc (not make: Open MPI
# may be absent).
EXTRA_DIST += tests/mpi/coll_bench_mpi.c
