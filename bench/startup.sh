#!/usr/bin/env bash
# Start-up as users launch it (issues 37, 51): a generator already sends
# 1514-byte frames at its maximum into a veth pair between two namespaces
# this script makes and removes; `weir capture` starts in its default mode
# (pcap and records, default staging and rings) on the other end, to tmpfs,
# and `tcpdump -w` beside it, interleaved, REPS times each, every launch
# 3 s after the previous capture ended (not straight after it: by then a
# VM's host has taken the freed memory back, and the kernel sets up rings
# from cold memory, as for a user's launch). For each run: time from exec
# to "capturing on" / "listening on", and the frames offered and dropped in
# the first second (weir: its stats table's first second; tcpdump: its
# whole 2 s run, the only count it gives). Medians and worst at the end.
#
#   bench/startup.sh [REPS] [weir capture options...]   (as root)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
REPS=${1:-5}
shift || true
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
veth_pair "$a" "$b"
mkdir -p "$work"

now_ms() { date +%s%3N; }
# Waits (at most 10 s) for TEXT in FILE; prints the ms since START.
ready_after() {
  local file=$1 text=$2 start=$3
  for _ in $(seq 2000); do
    grep -q "$text" "$file" 2>/dev/null && { echo $(($(now_ms) - start)); return; }
    sleep 0.005
  done
  echo never
}

echo "# start-up, launches 3 s apart: $(nproc) cores, $(uname -r), weir $("$W" --version 2>/dev/null | head -1)"
echo "# weir capture $* ; load: $(uptime | sed 's/.*load average: //')"
echo
echo "| run | tool | ready after (ms) | first-second frames | first-second drops |"
echo "|---|---|---|---|---|"
# One generator for the whole run (bounded: it stops on its own).
ip netns exec "$a" "$W" gen -i veth0 --size 1514 --duration $((REPS * 12 + 10))s --count 1G --flows 1000 \
  >/dev/null 2>&1 &
gen=$!
sleep 1
weir_ms="" td_ms=""
for r in $(seq "$REPS"); do
  sleep 3
  rm -rf "$work/ds"
  t=$(now_ms)
  ip netns exec "$b" "$W" capture -i veth0 -o "$work/ds" --duration 2s --stats-json "$@" \
    >"$work/weir.json" 2>"$work/weir.err" &
  cap=$!
  ms=$(ready_after "$work/weir.err" "capturing on" "$t")
  wait "$cap" || true
  weir_ms="$weir_ms $ms"
  first=$(head -1 "$work/weir.json")
  frames=$(echo "$first" | sed -n 's/.*"frames":\([0-9]*\).*/\1/p')
  drops=$(echo "$first" | sed -n 's/.*"kernel_drops":\([0-9]*\),"pcap_drops":\([0-9]*\).*/\1+\2/p')
  echo "| $r | weir | $ms | ${frames:-?} | $((${drops:-0})) |"
  sleep 3
  rm -f "$work/t.pcap"
  t=$(now_ms)
  ip netns exec "$b" timeout -s INT 2 tcpdump -i veth0 -w "$work/t.pcap" -B 262144 \
    >/dev/null 2>"$work/td.err" &
  cap=$!
  ms=$(ready_after "$work/td.err" "listening on" "$t")
  wait "$cap" || true
  td_ms="$td_ms $ms"
  got=$(sed -n 's/^\([0-9]*\) packets received by filter.*/\1/p' "$work/td.err")
  dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$work/td.err")
  echo "| $r | tcpdump -B 256M (whole run) | $ms | ${got:-?} | ${dropped:-?} |"
done
echo
echo "ready after, ms: weir median $(echo "$weir_ms" | median), worst $(echo "$weir_ms" | worst);" \
  "tcpdump median $(echo "$td_ms" | median), worst $(echo "$td_ms" | worst)"
