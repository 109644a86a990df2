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
# over shared memory on one host, a host with another hostname (its own
# UTS namespace) or another working folder changes nothing, and a link cut
# mid-training ends the job within 60 s naming the rank cut off, the last
# checkpoint whole and resumable on the hosts left.

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
  # mpirun's host gives up a TCP peer that acknowledges nothing after 5
  # retransmissions, about 13 s (Linux's default, 15: about 15 minutes):
  # netrun(1)'s recipe for a host cut off mid-training
  ip netns exec ${NS}0 sysctl -qw net.ipv4.tcp_retries2=5
  ip -n ${NS}0 link set br0 up
}

teardown_file() {
  [ -n "${NS:-}" ] || return 0
  # what a cut link left behind (a daemon or rank that lost mpirun)
  for h in 0 1 2; do ip netns pids ${NS}$h 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
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

# The recipe's keepalives (netrun(1)): a daemon and mpirun give each other
# up after 15 to 35 s of silence (Open MPI's default: 8 to 13 minutes);
# what mpirun sends to a host cut off, it gives up after tcp_retries2
# (setup_file).  Both come later than the ranks' collective timeout (5 s
# here), so the ranks say which rank went silent before mpirun says which
# host did.
KEEPALIVE="--mca oob_tcp_keepalive_time 20 --mca oob_tcp_keepalive_intvl 5 --mca oob_tcp_keepalive_probes 3"

@test "a link cut mid-training ends the job within 60 s naming the rank cut off; its checkpoint resumes on 2 hosts" {
  NETRUN_COLLECTIVE_TIMEOUT=5 hosts -x NETRUN_COLLECTIVE_TIMEOUT $KEEPALIVE -np 3 --wdir "$PWD" \
    "$NETRUN" train mlp.net --epochs 1000000 --save cut.ckpt > cut.out 2>&1 &
  job=$!
  for _ in $(seq 600); do [ -s cut.ckpt ] && break; sleep 0.1; done
  [ -s cut.ckpt ]
  sleep 2   # some epochs more, over TCP
  ip -n ${NS}0 link set ${NS}a2 down   # host h2's cable, at the switch
  cut=$SECONDS
  status=0
  wait $job || status=$?
  took=$((SECONDS - cut))
  ip -n ${NS}0 link set ${NS}a2 up
  cat cut.out
  echo "ended ${took} s after the cut, status $status"
  [ "$status" -ne 0 ]
  [ "$took" -le 60 ]
  # ranks 0 and 1 both wait for rank 2: the first to give up ends the job,
  # and the other may be ended before it says so
  grep -Eq "^netrun: error: rank [01]: no answer from rank 2 for [5-9] s \(its host unreachable\?\); stopping$" cut.out
  # the last checkpoint is whole, and resumes on the two hosts left
  run "$NETRUN" checkpoint cut.ckpt
  [ "$status" -eq 0 ]
  epoch=$(sed -n 's/^epoch: \([0-9]*\)$/\1/p' <<< "$output")
  [ "$epoch" -ge 1 ]
  run hosts $KEEPALIVE -np 2 --host $NET.1,$NET.2 --wdir "$PWD" \
    "$NETRUN" train mlp.net --resume cut.ckpt --epochs $((epoch + 1)) --save resumed.ckpt
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"epoch $((epoch + 1))/$((epoch + 1))"* ]]
  [ -s resumed.ckpt ]
}
