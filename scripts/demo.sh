#!/usr/bin/env bash
# The main job end to end on a built-in default: installs what is missing,
# makes a veth pair between two network namespaces, sends traffic with
# `weir gen` in one while `weir capture` records it in the other, prints
# what the dataset holds and the analyses, and draws the rates, bursts and
# loss plots beside the dataset. The namespaces are removed afterwards.
# Every line it prints fits an 80-column terminal.
# Usage (as root): scripts/demo.sh [SECONDS]   (default 5)
# Knobs: WEIR_DEMO_DIR (default /tmp/weir-demo), WEIR_DEMO_RATE (frames/s,
# default 200000), WEIR_DEMO_BIN (a built weir: skips installing and
# building), WEIR_DEMO_NS (the namespaces' name prefix, default weir-demo).
source "$(dirname "$0")/lib.sh"

seconds=${1:-5}
rate=${WEIR_DEMO_RATE:-200000}
if [ -n "${WEIR_DEMO_BIN:-}" ]; then
  WEIR=$WEIR_DEMO_BIN
else
  install_packages
  install_rust
  build_release
fi

out=${WEIR_DEMO_DIR:-/tmp/weir-demo}
ns_a=${WEIR_DEMO_NS:-weir-demo}-a
ns_b=${WEIR_DEMO_NS:-weir-demo}-b
cleanup() {
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
say "a veth pair between network namespaces $ns_a and $ns_b"
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
ds=$out/dataset
say "capturing on veth0 in $ns_b for $seconds s"
echo "weir capture -i veth0 -o DATASET --compress auto --duration ${seconds}s"
echo "DATASET: $ds"
ip netns exec "$ns_b" "$WEIR" capture -i veth0 -o "$ds" --force --compress auto \
  --duration "${seconds}s" > "$out/capture.out" 2> "$out/capture.log" &
capture_pid=$!
# Wait until the rings are open (the capture says so), at most 30 s.
for _ in $(seq 300); do
  grep -q "capturing on" "$out/capture.log" 2>/dev/null && break
  sleep 0.1
done
say "sending IMIX traffic over 1,000 flows from $ns_a for $((seconds - 2)) s"
echo "weir gen -i veth0 --size imix --flows 1000 --rate $rate"
ip netns exec "$ns_a" "$WEIR" gen -i veth0 --size imix --flows 1000 --rate "$rate" \
  --duration "$((seconds - 2))s" --count 10000000
wait "$capture_pid"
cat "$out/capture.log" >&2
# The capture's own lines; weir info below says what the dataset holds.
sed -n '1,/^weir capture: dataset/p' "$out/capture.out"
say "what the dataset holds: weir info DATASET"
"$WEIR" info "$ds"
# The analyses as an 80-column terminal shows them, wherever this goes.
for analysis in summary rates bursts "top pairs --limit 5" "flows --limit 5" loss; do
  say "weir analyze DATASET $analysis"
  # shellcheck disable=SC2086 # the analysis's words
  "$WEIR" analyze "$ds" $analysis --width 80
done
say "plots of the rates, bursts and loss"
for analysis in rates bursts loss; do
  "$WEIR" analyze "$ds" "$analysis" --plot "$out/$analysis.png" > /dev/null
  echo "$out/$analysis.png"
done
say "frames of one flow back out of the dataset"
echo "weir read DATASET udp port 1024 -w one-flow.pcap"
"$WEIR" read "$ds" udp port 1024 -w "$out/one-flow.pcap" --force
say "next"
echo "browse the dataset:    weir serve $ds"
echo "open the flow's pcap:  wireshark $out/one-flow.pcap"
