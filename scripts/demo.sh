#!/usr/bin/env bash
# The main job end to end on a built-in default: installs what is missing,
# makes a veth pair between two network namespaces, sends traffic with
# `weir gen` in one while `weir capture` records it in the other, and prints
# what the dataset holds. The namespaces are removed afterwards.
# Usage (as root): scripts/demo.sh [SECONDS]   (default 5)
source "$(dirname "$0")/lib.sh"

seconds=${1:-5}
install_packages
install_rust
build_release

out=${WEIR_DEMO_DIR:-/tmp/weir-demo}
ns_a=weir-demo-a
ns_b=weir-demo-b
cleanup() {
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
say "making a veth pair between network namespaces $ns_a and $ns_b"
ip netns add "$ns_a"
ip netns add "$ns_b"
ip -n "$ns_a" link add veth0 type veth peer name veth0 netns "$ns_b"
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set veth0 up
done
ip -n "$ns_a" addr add 10.99.0.1/24 dev veth0
ip -n "$ns_b" addr add 10.99.0.2/24 dev veth0

mkdir -p "$out"
say "capturing on veth0 in $ns_b for $seconds s: weir capture -i veth0 -o $out/dataset --compress auto"
ip netns exec "$ns_b" "$WEIR" capture -i veth0 -o "$out/dataset" --force --compress auto \
  --duration "${seconds}s" 2> "$out/capture.log" &
capture_pid=$!
# Wait until the rings are open (the capture says so), at most 30 s.
for _ in $(seq 300); do
  grep -q "capturing on" "$out/capture.log" 2>/dev/null && break
  sleep 0.1
done
say "sending IMIX traffic over 1,000 flows from $ns_a for $((seconds - 2)) s: weir gen -i veth0"
ip netns exec "$ns_a" "$WEIR" gen -i veth0 --size imix --flows 1000 --rate 200000 \
  --duration "$((seconds - 2))s" --count 10000000
wait "$capture_pid"
cat "$out/capture.log" >&2
say "what the dataset holds: weir info $out/dataset"
"$WEIR" info "$out/dataset"
say "the analysis report: weir analyze $out/dataset summary | rates | bursts | top | flows | loss"
"$WEIR" analyze "$out/dataset" summary
"$WEIR" analyze "$out/dataset" rates --every 2s --sample 100ms
"$WEIR" analyze "$out/dataset" bursts --scales 1ms,10ms,100ms,1s
"$WEIR" analyze "$out/dataset" top pairs --limit 5
"$WEIR" analyze "$out/dataset" flows --limit 5
"$WEIR" analyze "$out/dataset" loss
say "frames of one flow back out of the dataset: weir read $out/dataset udp port 1024 -w $out/one-flow.pcap"
"$WEIR" read "$out/dataset" udp port 1024 -w "$out/one-flow.pcap" --force
echo
echo "Records: $out/dataset/packets/*.parquet  frames: $out/dataset/pcap/*.pcap*  stats: $out/dataset/stats/*.parquet"
