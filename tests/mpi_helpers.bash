# mpi_helpers.bash — what mpi.bats and mpi2.bats share; `load mpi_helpers`.
#
# Under `make asan` the ranks run with leak detection off (Open MPI leaves
# its own allocations at MPI_Finalize, in components it has unloaded by
# then); under `make valgrind` they run the plain binary (NETRUN_BIN).

# mpi_setup: NETRUN, M (tests/mpi), the test's temporary folder as the
# working one, and the options every mpirun below needs.
mpi_setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  M=$BATS_TEST_DIRNAME/mpi
  cd "$BATS_TEST_TMPDIR" || return 1
  ROOT_OK=()
  [ "$(id -u)" != 0 ] || ROOT_OK=(--allow-run-as-root)
  RANK_ENV=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
  RANK=${NETRUN_BIN:-$NETRUN}
}

# mpi NP ARGS...: netrun ARGS on NP ranks of this machine, under timeout.
mpi() {
  local np=$1
  shift
  timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np "$np" "$RANK" "$@"
}
