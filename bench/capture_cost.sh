#!/usr/bin/env bash
# What a capture costs and keeps, side by side (issue 51): weir's default
# mode (pcap and records), `weir capture --pcap` and `tcpdump -w`, each
# pinned to CPU 1 with a 256 MiB ring, an independent `weir gen` pinned to
# CPU 0 sending SIZE-byte frames over 1,024 flows at RATE frames/s (0: its
# maximum) for 8 s into a veth pair between two namespaces this script
# makes and removes. Runs are interleaved, REPS of each, every launch 3 s
# after the previous capture ended. Per run:
#   - window ns/frame: the capturer's CPU (utime+stime of the whole
#     process) from 2 s into the traffic to its end, per frame received
#     then (the issue's measure);
#   - whole ns/frame: all its CPU from the traffic's start to its exit
#     (weir builds records it put off at the end: that is counted here),
#     per frame received;
#   - kept: frames in its pcap files against frames sent;
#   - late: weir's records built from the pcap files instead of as the
#     frames came (its manifest's late_records.built);
#   - peak RSS (VmHWM).
# Medians per tool at the end.
#
#   bench/capture_cost.sh [REPS] [SIZE] [RATE] [DIR]   (as root)
#   bench/capture_cost.sh 5 64 300000 /dev/shm      # steady state, small frames
#   bench/capture_cost.sh 5 1514 0 /var/tmp/weir    # the generator's maximum, to disk
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
REPS=${1:-5}
SIZE=${2:-64}
RATE=${3:-300000}
DIR=${4:-/dev/shm}
SECS=8
a=weir-cc-a-$$ b=weir-cc-b-$$
work=$DIR/weir-capture-cost-$$
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
veth_pair "$a" "$b"
mkdir -p "$work"

ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)
rate_arg=()
[ "$RATE" != 0 ] && rate_arg=(--rate "$RATE")

echo "# capture cost: $(nproc) cores, $(uname -r), weir $("$W" --version 2>/dev/null | head -1), tcpdump $(tcpdump --version 2>&1 | head -1 | awk '{print $3}')"
echo "# $SIZE-byte frames, rate ${RATE/#0/max}, 1,024 flows, ${SECS} s, to $DIR ($(stat -f -c %T "$DIR")); load: $(uptime | sed 's/.*load average: //')"
if [ "$(stat -f -c %T "$DIR")" != tmpfs ]; then
  # The disk's own bandwidth, as weir writes (O_DIRECT, large writes).
  bw=$(dd if=/dev/zero of="$work/dd" bs=4M count=256 oflag=direct 2>&1 | sed -n 's/.*, \([0-9.,]* [GM]B\/s\)$/\1/p')
  rm -f "$work/dd"
  echo "# the disk's O_DIRECT write bandwidth now (dd, 1 GiB in 4 MiB writes): $bw"
fi
echo
echo "| run | tool | sent | received | kept % | window ns/frame | whole ns/frame | late records | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"

declare -A WIN WHOLE KEPT
run() {
  local rep=$1 tool=$2
  sleep 3
  rm -rf "$work/out" && mkdir -p "$work/out"
  local cmd
  case $tool in
    weir) cmd=("$W" capture -i veth0 -o "$work/out/ds" -B 262144 udp) ;;
    weir-pcap) cmd=("$W" capture -i veth0 -o "$work/out/ds" --pcap -B 262144 udp) ;;
    tcpdump) cmd=(tcpdump -i veth0 -w "$work/out/t.pcap" -B 262144 -n udp) ;;
  esac
  rm -f "$work/err.txt" "$work/pid" "$work/times"
  # The capturer under a subshell that reports its children's CPU at exit.
  ip netns exec "$b" taskset -c 1 bash -c '"$@" & p=$!; echo $p > '"$work/pid"'; wait $p; times > '"$work/times" _ "${cmd[@]}" \
    >"$work/out.txt" 2>"$work/err.txt" &
  local shell=$!
  for _ in $(seq 400); do
    grep -qE "capturing on|listening on" "$work/err.txt" 2>/dev/null && break
    sleep 0.025
  done
  local pid
  pid=$(cat "$work/pid" 2>/dev/null || true)
  if [ -z "$pid" ] || ! grep -qE "capturing on|listening on" "$work/err.txt" 2>/dev/null; then
    echo "| $rep | $tool | did not start: $(head -c 300 "$work/err.txt" 2>/dev/null) |"
    [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null
    wait "$shell" || true
    return
  fi
  sleep 1
  ip netns exec "$a" taskset -c 0 "$W" gen -i veth0 --size "$SIZE" "${rate_arg[@]}" --duration "${SECS}s" \
    --flows 1024 --payload half-random >"$work/gen.txt" 2>&1 &
  local g=$!
  local ts t0 t1 rss
  ts=$(ticks "$pid")
  sleep 2
  t0=$(ticks "$pid")
  wait "$g" || true
  t1=$(ticks "$pid")
  rss=$(awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status" 2>/dev/null || echo "?")
  sleep 0.5
  kill -INT "$pid" 2>/dev/null || true
  wait "$shell" || true
  local sent received kept late
  sent=$(grep -oE "sent [0-9,]+ frames" "$work/gen.txt" | head -1 | tr -dc 0-9)
  if [ "$tool" = tcpdump ]; then
    received=$(sed -n 's/^\([0-9]*\) packets received by filter.*/\1/p' "$work/err.txt")
    kept=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$work/err.txt")
    late=-
  else
    local m="$work/out/ds/manifest.json"
    received=$(python3 -c "import json,sys; m=json.load(open('$m')); print(m['counts']['frames'])")
    kept=$(python3 -c "import json,sys; m=json.load(open('$m')); print(sum(f['frames'] for f in m['files']['pcap']))")
    late=$(python3 -c "import json,sys; m=json.load(open('$m')); print((m.get('late_records') or {}).get('built', 0))")
  fi
  local whole_s
  whole_s=$(sed -n 2p "$work/times" | awk '{
    split($1,u,"m"); split($2,s,"m"); sub("s","",u[2]); sub("s","",s[2]);
    print u[1]*60+u[2]+s[1]*60+s[2] }')
  local win whole kp
  # Frames received in the window: the share of the traffic after 2 s.
  win=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v r="$received" -v s=$SECS 'BEGIN {f=r*(s-2)/s; printf "%.0f", (f>0 ? d/hz*1e9/f : 0)}')
  whole=$(awk -v c="$whole_s" -v ts="$ts" -v hz="$hz" -v r="$received" 'BEGIN {printf "%.0f", (r>0 ? (c-ts/hz)*1e9/r : 0)}')
  kp=$(awk -v k="$kept" -v s="$sent" 'BEGIN {printf "%.1f", (s>0 ? k*100/s : 0)}')
  WIN[$tool]="${WIN[$tool]:-} $win"
  WHOLE[$tool]="${WHOLE[$tool]:-} $whole"
  KEPT[$tool]="${KEPT[$tool]:-} $kp"
  echo "| $rep | $tool | $sent | $received | $kp | $win | $whole | $late | $rss |"
}

for r in $(seq "$REPS"); do
  for t in weir weir-pcap tcpdump; do run "$r" "$t"; done
done
echo
for t in weir weir-pcap tcpdump; do
  echo "median $t: window $(echo "${WIN[$t]}" | median) ns/frame, whole $(echo "${WHOLE[$t]}" | median) ns/frame, kept $(echo "${KEPT[$t]}" | median) % (all:${KEPT[$t]})"
done
# What the records of the same traffic cost in a conversion: the same
# frames (2.4 M, written by weir gen), `weir convert -j 1` pinned to CPU 1.
rm -rf "$work/out" && mkdir -p "$work/out"
"$W" gen --size "$SIZE" --count 2400000 --flows 1024 --payload half-random \
  -w "$work/out/g.pcap" >/dev/null 2>&1
conv=""
for r in $(seq "$REPS"); do
  rm -rf "$work/out/ds"
  s=$( { /usr/bin/env bash -c 'taskset -c 1 "$@" >/dev/null 2>&1; times' _ "$W" convert -j 1 \
    "$work/out/g.pcap" -o "$work/out/ds"; } | sed -n 2p | awk '{
    split($1,u,"m"); split($2,s,"m"); sub("s","",u[2]); sub("s","",s[2]);
    print u[1]*60+u[2]+s[1]*60+s[2] }')
  conv="$conv $(awk -v c="$s" 'BEGIN {printf "%.0f", c*1e9/2400000}')"
done
echo "median weir convert -j 1 of the same traffic (2.4 M frames): $(echo "$conv" | median) ns/frame (all:$conv)"
