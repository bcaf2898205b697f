# Open MPI's ofi MTL over tcp;ofi_layer (skipped without Open MPI).
dist_check_SCRIPTS += tests/mpi/test_ompi.sh
TESTS += tests/mpi/test_ompi.sh
EXTRA_DIST += tests/mpi/mpi_probe.c
CLEANFILES += tests/mpi/mpi_probe
