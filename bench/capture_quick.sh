#!/usr/bin/env bash
# A quick look at live capture cost before the full side-by-side benchmark
# (issue 4): one veth pair between two namespaces it makes and removes,
# `weir gen` at its maximum rate for 4 s pinned to CPU 0, `weir capture`
# pinned to CPU 1, as in shared/BASELINES.md. Prints what was sent, what
# was captured and dropped, and the capturer's CPU (utime+stime from /proc)
# per captured frame.
#
#   bench/capture_quick.sh SIZE [weir capture options...]
#   bench/capture_quick.sh 64 -o /dev/shm/cq/ds -j 1 --pcap
#   bench/capture_quick.sh 1514 -o /dev/shm/cq/ds -j 2
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
size=$1
shift
a=weir-cq-a b=weir-cq-b
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; rm -rf /dev/shm/cq; }
trap cleanup EXIT
cleanup
veth_pair "$a" "$b"
mkdir -p /dev/shm/cq
ip netns exec "$b" taskset -c 1 "$W" capture -i veth0 "$@" --duration 6s udp \
  > /dev/shm/cq/out.txt 2> /dev/shm/cq/err.txt &
cap=$!
for _ in $(seq 300); do grep -q "capturing on" /dev/shm/cq/err.txt 2>/dev/null && break; sleep 0.05; done
pid=$(pgrep -P "$cap" -x weir || echo "$cap")
sleep 0.3
t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
ip netns exec "$a" taskset -c 0 "$W" gen -i veth0 --size "$size" --duration 4s --flows 1000 \
  --payload half-random > /dev/shm/cq/gen.txt
t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
wait "$cap"
head -1 /dev/shm/cq/gen.txt
grep "weir capture:" /dev/shm/cq/out.txt | head -1
grep -E "^(drops|pcap) " /dev/shm/cq/out.txt || true
frames=$(grep -o "^weir capture: captured [0-9,]* frames" /dev/shm/cq/out.txt | head -1 | tr -dc 0-9)
ticks=$(getconf CLK_TCK)
echo "capturer CPU while sending: $(( (t1 - t0) * 1000 / ticks )) ms, $(( (t1 - t0) * 1000000000 / ticks / (frames + 1) )) ns per captured frame"
