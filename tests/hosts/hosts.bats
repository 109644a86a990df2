#!/usr/bin/env bats
# hosts.bats — netrun on several hosts over a real network, on this
# machine: `make test-hosts` (root; .ci/run calls it after make test).
#
# Three "hosts" are network namespaces joined by veth pairs to a bridge in
# the first: h0 10.231.7.1 (where mpirun runs), h1 10.231.7.2, h2
# 10.231.7.3.  Every address lives inside a namespace the test creates and
# removes; nothing is sent anywhere else.  Open MPI's TCP transport (btl
# tcp) and its out-of-band channel are restricted to that subnet, and its
# launcher enters a namespace instead of ssh (plm_rsh_agent: agent.sh,
# written below), so mpirun starts its daemons the way it would on real
# hosts.  Shows: training over TCP between the hosts gives the same bits as
# over shared memory on one host, and a host with another hostname (its own
# UTS namespace) or another working folder changes nothing.

NET=10.231.7

setup_file() {
  export NS="nrt$$"
  [ "$(id -u)" = 0 ] || return 0
  ip netns add ${NS}0 && ip netns add ${NS}1 && ip netns add ${NS}2 || return 1
  ip -n ${NS}0 link add br0 type bridge
  ip -n ${NS}0 addr add $NET.1/24 dev br0
  for h in 1 2; do
    ip link add ${NS}a$h type veth peer name ${NS}b$h
    ip link set ${NS}a$h netns ${NS}0
    ip link set ${NS}b$h netns ${NS}$h
    ip -n ${NS}0 link set ${NS}a$h master br0 up
    ip -n ${NS}$h addr add $NET.$((h + 1))/24 dev ${NS}b$h
    ip -n ${NS}$h link set ${NS}b$h up
  done
  for h in 0 1 2; do ip -n ${NS}$h link set lo up; done
  ip -n ${NS}0 link set br0 up
}

teardown_file() {
  [ -n "${NS:-}" ] || return 0
  for h in 0 1 2; do ip netns del ${NS}$h 2>/dev/null || true; done
}

setup() {
  [ "$(id -u)" = 0 ] || skip "network namespaces need root"
  command -v mpirun >/dev/null || skip "Open MPI is not installed (make deps)"
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../../netrun}
  M=$BATS_TEST_DIRNAME/../mpi
  cd "$BATS_TEST_TMPDIR"
  # agent.sh HOST COMMAND...: what ssh would do, by entering HOST's
  # namespace; host h2 also gets its own hostname (a UTS namespace)
  cat > agent.sh <<SH
#!/bin/sh
host=\$1
shift
case \$host in
  $NET.1) exec ip netns exec ${NS}0 sh -c "\$*" ;;
  $NET.2) exec ip netns exec ${NS}1 sh -c "\$*" ;;
  $NET.3) exec ip netns exec ${NS}2 unshare --uts sh -c "hostname another-host && \$*" ;;
esac
echo "agent.sh: no host \$host" >&2
exit 1
SH
  chmod +x agent.sh
  printf '%s slots=1\n' $NET.1 $NET.2 $NET.3 > hostfile
  cp "$M/mlp.net" "$M/blobs.csv" .
}

# hosts ARGS...: mpirun in h0 over the three hosts, TCP only.
hosts() {
  timeout 120 ip netns exec ${NS}0 mpirun --allow-run-as-root --hostfile hostfile --mca plm_rsh_agent "$PWD/agent.sh" \
    --mca btl tcp,self --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 \
    --mca btl_tcp_port_min_v4 40000 --mca btl_tcp_port_range_v4 100 "$@"
}

@test "training over TCP between three hosts gives the bits of shared memory on one" {
  run hosts -np 3 --wdir "$PWD" "$NETRUN" train mlp.net --save tcp.ckpt
  [ "$status" -eq 0 ]
  run timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl vader,self -np 3 "$NETRUN" train mlp.net --save shm.ckpt
  [ "$status" -eq 0 ]
  cmp tcp.ckpt shm.ckpt
}

@test "the ranks run on the hosts they were given, one of them named another-host" {
  run hosts -np 3 --wdir "$PWD" sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname) $(grep -o "$0"b[12] /proc/net/dev | head -1)"' "$NS"
  [ "$status" -eq 0 ]
  [[ "$output" == *"1 "*" ${NS}b1"* ]]
  [[ "$output" == *"2 another-host ${NS}b2"* ]]
}

@test "another working folder (with the same files) on one host changes nothing" {
  run hosts -np 3 --wdir "$PWD" "$NETRUN" train mlp.net --save one.ckpt
  [ "$status" -eq 0 ]
  mkdir elsewhere
  cp mlp.net blobs.csv elsewhere/
  run hosts -np 1 -host $NET.1 --wdir "$PWD" "$NETRUN" train mlp.net --save two.ckpt : \
    -np 1 -host $NET.2 --wdir "$PWD" "$NETRUN" train mlp.net --save two.ckpt : \
    -np 1 -host $NET.3 --wdir "$PWD/elsewhere" "$NETRUN" train mlp.net --save two.ckpt
  [ "$status" -eq 0 ]
  cmp one.ckpt two.ckpt
}
