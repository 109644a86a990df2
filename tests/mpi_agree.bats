#!/usr/bin/env bats
# mpi_agree.bats — ranks that disagree are found before they train (issue
# 31): each rank hashes the examples it read and the values it will
# receive, and the ranks compare those fixed-size hashes before anything
# else crosses between them.  A rank reading other data (another file, or
# the same name in another working folder) or with another --optimizer
# stops every rank with a message, never trains on, never ends in an MPI
# error.

load mpi_helpers

setup() {
  command -v mpirun >/dev/null || skip "Open MPI is not installed (make deps)"
  mpi_setup
}

# two PROGRAM1-ARGS -- PROGRAM2-ARGS: rank 0 and rank 1 with other arguments.
two() {
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 "$RANK" "${a[@]}" : \
    "${RANK_ENV[@]}" -np 1 "$RANK" "${b[@]}"
}

@test "a rank reading other data of the same shape stops every rank" {
  cp "$M/mlp.net" "$M/blobs.csv" .
  # the same rows, one value changed
  sed '2s/^1.433/1.434/' blobs.csv > d2.csv
  two train mlp.net -- train mlp.net --data d2.csv
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 1 trains another program, settings, data or checkpoint than rank 0; stopping"* ]]
  [[ "$output" != *"trained"* ]]
}

@test "the same file name with other contents in another working folder stops every rank" {
  mkdir a b
  cp "$M/mlp.net" "$M/blobs.csv" a/
  cp "$M/mlp.net" b/
  sed '3s/^-0.422/-0.423/' "$M/blobs.csv" > b/blobs.csv
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 -wdir "$PWD/a" "$RANK" train mlp.net : \
    "${RANK_ENV[@]}" -np 1 -wdir "$PWD/b" "$RANK" train mlp.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 1 trains another program, settings, data or checkpoint than rank 0; stopping"* ]]
  # the same contents train
  cp a/blobs.csv b/blobs.csv
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 -wdir "$PWD/a" "$RANK" train mlp.net : \
    "${RANK_ENV[@]}" -np 1 -wdir "$PWD/b" "$RANK" train mlp.net
  [ "$status" -eq 0 ]
}

@test "a rank with another --optimizer gets a clear error, not an MPI error" {
  cp "$M/mlp.net" "$M/blobs.csv" .
  two train mlp.net -- train mlp.net --optimizer adam
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 1 trains another program, settings, data or checkpoint than rank 0; stopping"* ]]
  [[ "$output" != *"MPI_ERR"* ]]
  [[ "$output" != *"unpack"* ]]
}
