#!/usr/bin/env bash
# Start-up under load (issue 37): a generator already sends 1514-byte
# frames at its maximum into a veth pair between two namespaces this script
# makes and removes; `weir capture` starts in its default mode (pcap and
# records, default staging and ring) on the other end, to tmpfs, and
# `tcpdump -w` starts the same way, interleaved, REPS times each. For each
# run: time from exec to "capturing on" / "listening on", and the frames
# offered and dropped in the first second (weir: its stats table's first
# second; tcpdump: its whole 3 s run, the only count it gives).
#
#   bench/startup.sh [REPS]        (as root; weir from target/release)
set -euo pipefail
W=${WEIR:-$(cd "$(dirname "$0")/.." && pwd)/target/release/weir}
[ -x "$W" ] || W=${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}/release/weir
REPS=${1:-5}
a=weir-su-a-$$ b=weir-su-b-$$
work=/dev/shm/weir-startup-$$
gen=
cleanup() {
  [ -n "$gen" ] && kill "$gen" 2>/dev/null && wait "$gen" 2>/dev/null
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip -n "$a" link add veth0 type veth peer name veth0 netns "$b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; ip -n "$ns" link set veth0 up; done
mkdir -p "$work"

now_ms() { date +%s%3N; }
# Waits (at most 10 s) for TEXT in FILE; prints the ms since START.
ready_after() {
  local file=$1 text=$2 start=$3
  for _ in $(seq 1000); do
    grep -q "$text" "$file" 2>/dev/null && { echo $(($(now_ms) - start)); return; }
    sleep 0.01
  done
  echo never
}

echo "# start-up under load: $(nproc) cores, $(uname -r), weir $("$W" --version 2>/dev/null | head -1)"
echo
echo "| run | tool | ready after (ms) | first-second frames | first-second drops |"
echo "|---|---|---|---|---|"
for r in $(seq "$REPS"); do
  ip netns exec "$a" "$W" gen -i veth0 --size 1514 --duration 40s --flows 1000 >/dev/null 2>&1 &
  gen=$!
  sleep 1
  # weir, default mode
  rm -rf "$work/ds"
  t=$(now_ms)
  ip netns exec "$b" "$W" capture -i veth0 -o "$work/ds" --duration 3s --stats-json \
    >"$work/weir.json" 2>"$work/weir.err" &
  cap=$!
  ms=$(ready_after "$work/weir.err" "capturing on" "$t")
  wait "$cap" || true
  first=$(head -1 "$work/weir.json")
  frames=$(echo "$first" | sed -n 's/.*"frames":\([0-9]*\).*/\1/p')
  drops=$(echo "$first" | sed -n 's/.*"kernel_drops":\([0-9]*\),"pcap_drops":\([0-9]*\).*/\1+\2/p')
  echo "| $r | weir | $ms | ${frames:-?} | $((${drops:-0})) |"
  # tcpdump -w, the same way
  rm -f "$work/t.pcap"
  t=$(now_ms)
  ip netns exec "$b" timeout -s INT 3 tcpdump -i veth0 -w "$work/t.pcap" -B 262144 \
    >/dev/null 2>"$work/td.err" &
  cap=$!
  ms=$(ready_after "$work/td.err" "listening on" "$t")
  wait "$cap" || true
  got=$(sed -n 's/^\([0-9]*\) packets received by filter.*/\1/p' "$work/td.err")
  dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$work/td.err")
  echo "| $r | tcpdump -B 256M (whole run) | $ms | ${got:-?} | ${dropped:-?} |"
  kill "$gen" 2>/dev/null || true
  wait "$gen" 2>/dev/null || true
  gen=
done
