#!/usr/bin/env bash
# What a capture costs and keeps, side by side (issues 51 and 60): weir's
# default mode (pcap and records), `weir capture --pcap`, Stenographer's
# `stenotype` (Debian's stenographer package, installed here if absent)
# and `tcpdump -w`, each pinned to CPU 1 with a 256 MiB ring, an
# independent `weir gen` pinned to CPU 0 sending SIZE-byte frames over
# 1,024 flows at RATE frames/s (0: its maximum) for 8 s into a veth pair
# between two namespaces this script makes and removes. "none" runs the
# generator with nothing capturing: the receiving core's own baseline.
# Runs are interleaved, REPS of each, every launch 3 s after the previous
# capture ended. Per run:
#   - gen kpps: the generator's rate while the tool captured (on veth the
#     receive side, AF_PACKET's copy into the ring included, runs as
#     softirq on the sender's core, so what a capture costs in the kernel
#     slows the generator);
#   - softirq ns: CPU 0's softirq time (/proc/stat) from 2 s into the
#     traffic to its end, per frame sent then;
#   - window ns/frame: the capturer's CPU (utime+stime of the whole
#     process) over the same window, per frame received then;
#   - whole ns/frame: all its CPU from the traffic's start to its exit
#     (weir builds records it put off at the end: that is counted here),
#     per frame received;
#   - kept: frames in its files against frames sent;
#   - late: weir's records built from the pcap files instead of as the
#     frames came (its manifest's late_records.built);
#   - peak RSS (VmHWM).
# Medians and ranges per tool at the end, side by side.
#
#   bench/capture_cost.sh [REPS] [SIZE] [RATE] [DIR]   (as root)
#   bench/capture_cost.sh 5 64 300000 /var/tmp/weir    # issue 60: 64 B, to disk
#   bench/capture_cost.sh 5 1514 0 /var/tmp/weir       # the generator's maximum, to disk
#   bench/capture_cost.sh 5 64 300000 /dev/shm         # to tmpfs
#   TOOLS="weir stenotype" bench/capture_cost.sh 3 1514 0 /var/tmp/weir
# WEIR_ARGS adds options to both weir runs (e.g. "-j 2").
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
REPS=${1:-5}
SIZE=${2:-64}
RATE=${3:-300000}
DIR=${4:-/dev/shm}
TOOLS=${TOOLS:-none stenotype weir weir-pcap tcpdump}
SECS=8
a=weir-cc-a-$$ b=weir-cc-b-$$
mkdir -p "$DIR"
work=$DIR/weir-capture-cost-$$
cleanup() {
  [ -n "${cap_pid:-}" ] && kill -9 "$cap_pid" 2>/dev/null
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [[ " $TOOLS " == *" stenotype "* ]] && ! command -v stenotype >/dev/null; then
  apt-get install -y stenographer >/dev/null || { apt-get update >/dev/null && apt-get install -y stenographer >/dev/null; }
fi
veth_pair "$a" "$b"
mkdir -p "$work"

ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# CPU 0's softirq time, in clock ticks.
softirq0() { awk '$1 == "cpu0" {print $8}' /proc/stat; }
hz=$(getconf CLK_TCK)
rate_arg=()
[ "$RATE" != 0 ] && rate_arg=(--rate "$RATE")
# stenotype takes a compiled classic filter in hex (what its compile_bpf.sh
# makes from tcpdump -ddd): the same "udp" every other tool applies.
steno_filter=$(ip netns exec "$b" tcpdump -i veth0 -ddd udp 2>/dev/null | tail -n +2 |
  while read -r c t f k; do printf "%04x%02x%02x%08x" "$c" "$t" "$f" "$k"; done)

echo "# capture cost: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(uname -r)"
echo "# weir $("$W" --version 2>/dev/null | head -1) ($W), tcpdump $(tcpdump --version 2>&1 | head -1 | awk '{print $3}'), stenographer $(dpkg-query -W -f '${Version}' stenographer 2>/dev/null || echo '?')"
echo "# $SIZE-byte frames, rate ${RATE/#0/max}, 1,024 flows, ${SECS} s, to $DIR ($(stat -f -c %T "$DIR")); tools: $TOOLS; $REPS reps"
echo "# load before: $(uptime | sed 's/.*load average: //'); rustc processes: $(pgrep -c rustc || true)"
echo "# weir:      weir capture -i veth0 -o DS -B 262144 ${WEIR_ARGS:-} udp"
echo "# weir-pcap: weir capture -i veth0 -o DS --pcap -B 262144 ${WEIR_ARGS:-} udp"
echo "# stenotype: stenotype --threads=1 --blocks=256 --blockage_sec=1 --filter=(udp) (index on, as installed)"
echo "# tcpdump:   tcpdump -i veth0 -w FILE -B 262144 -n udp"
if [ "$(stat -f -c %T "$DIR")" != tmpfs ]; then
  # The disk's own bandwidth, as weir writes (O_DIRECT, large writes).
  bw=$(dd if=/dev/zero of="$work/dd" bs=4M count=256 oflag=direct 2>&1 | sed -n 's/.*, \([0-9.,]* [GM]B\/s\)$/\1/p')
  rm -f "$work/dd"
  echo "# the disk's O_DIRECT write bandwidth now (dd, 1 GiB in 4 MiB writes): $bw"
fi
echo
echo "| run | tool | sent | gen kpps | softirq ns | received | kept % | window ns/frame | whole ns/frame | late records | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"

# Frames in stenotype's packet files: 1 MiB TPACKET_V3 blocks as the
# kernel filled them, the frame count at byte 12 of each block.
steno_frames() {
  python3 - "$1" <<'EOF'
import os, struct, sys
n = 0
for name in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], name), 'rb') as f:
        while True:
            b = f.read(1 << 20)
            if len(b) < 16:
                break
            n += struct.unpack_from('<I', b, 12)[0]
print(n)
EOF
}

json() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print($1)" "$work/out/ds/manifest.json"; }

declare -A WIN WHOLE KEPT GEN SOFT
cap_pid=
run() {
  local rep=$1 tool=$2
  sleep 3
  rm -rf "$work/out" && mkdir -p "$work/out"
  local cmd ready="capturing on|listening on|starting to process packets"
  case $tool in
    none) cmd=(sleep 3600) ;;
    weir) cmd=("$W" capture -i veth0 -o "$work/out/ds" -B 262144 ${WEIR_ARGS:-} udp) ;;
    weir-pcap) cmd=("$W" capture -i veth0 -o "$work/out/ds" --pcap -B 262144 ${WEIR_ARGS:-} udp) ;;
    tcpdump) cmd=(tcpdump -i veth0 -w "$work/out/t.pcap" -B 262144 -n udp) ;;
    stenotype)
      mkdir -p "$work/out/st/PKT0" "$work/out/st/IDX0"
      chown -R stenographer:stenographer "$work/out/st"
      cmd=(stenotype --dir="$work/out/st/" --iface=veth0 --threads=1 --blocks=256 --blockage_sec=1
        --filter="$steno_filter" --uid=stenographer --gid=stenographer -v) ;;
  esac
  rm -f "$work/err.txt" "$work/pid" "$work/times"
  # The capturer under a subshell that reports its children's CPU at exit.
  ip netns exec "$b" taskset -c 1 bash -c '"$@" & p=$!; echo $p > '"$work/pid"'; wait $p; times > '"$work/times" _ "${cmd[@]}" \
    >"$work/out.txt" 2>"$work/err.txt" &
  local shell=$!
  for _ in $(seq 400); do
    [ "$tool" = none ] && [ -s "$work/pid" ] && break
    grep -qE "$ready" "$work/err.txt" 2>/dev/null && break
    sleep 0.025
  done
  local pid
  pid=$(cat "$work/pid" 2>/dev/null || true)
  cap_pid=$pid
  if [ -z "$pid" ] || { [ "$tool" != none ] && ! grep -qE "$ready" "$work/err.txt" 2>/dev/null; }; then
    echo "| $rep | $tool | did not start: $(head -c 300 "$work/err.txt" 2>/dev/null | tr '\n|' '  ') |"
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    wait "$shell" || true
    return
  fi
  sleep 1
  ip netns exec "$a" taskset -c 0 "$W" gen -i veth0 --size "$SIZE" "${rate_arg[@]}" --duration "${SECS}s" \
    --flows 1024 --payload half-random >"$work/gen.txt" 2>&1 &
  local g=$!
  local ts t0 t1 s0 s1 rss
  ts=$(ticks "$pid")
  sleep 2
  t0=$(ticks "$pid")
  s0=$(softirq0)
  wait "$g" || true
  t1=$(ticks "$pid")
  s1=$(softirq0)
  rss=$(awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status" 2>/dev/null || echo "?")
  if [ "$tool" = stenotype ]; then
    # Its last block retires after --blockage_sec; its writes are
    # asynchronous. It may not exit on SIGINT (seen with 1.0.1): SIGKILL
    # after 3 s, its files are complete by then.
    sleep 2
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  elif [ "$tool" = none ]; then
    # (A child killed by SIGINT would make this shell act as if it got one.)
    kill -TERM "$pid" 2>/dev/null || true
  else
    sleep 0.5
    kill -INT "$pid" 2>/dev/null || true
  fi
  wait "$shell" || true
  cap_pid=
  local sent received kept late
  sent=$(grep -oE "sent [0-9,]+ frames" "$work/gen.txt" | head -1 | tr -dc 0-9)
  case $tool in
    none) received=$sent kept=0 late=- ;;
    tcpdump)
      received=$(sed -n 's/^\([0-9]*\) packets received by filter.*/\1/p' "$work/err.txt")
      kept=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$work/err.txt")
      late=- ;;
    stenotype)
      kept=$(steno_frames "$work/out/st/PKT0")
      received=$kept late=- ;;
    *)
      received=$(json "m['counts']['frames']")
      kept=$(json "sum(f['frames'] for f in m['files']['pcap'])")
      late=$(json "(m.get('late_records') or {}).get('built', 0)") ;;
  esac
  local whole_s
  whole_s=$(sed -n 2p "$work/times" | awk '{
    split($1,u,"m"); split($2,s,"m"); sub("s","",u[2]); sub("s","",s[2]);
    print u[1]*60+u[2]+s[1]*60+s[2] }')
  local win whole kp gk soft
  # Frames received in the window: the share of the traffic after 2 s.
  win=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v r="$received" -v s=$SECS 'BEGIN {f=r*(s-2)/s; printf "%.0f", (f>0 ? d/hz*1e9/f : 0)}')
  whole=$(awk -v c="$whole_s" -v ts="$ts" -v hz="$hz" -v r="$received" 'BEGIN {printf "%.0f", (r>0 ? (c-ts/hz)*1e9/r : 0)}')
  kp=$(awk -v k="$kept" -v s="$sent" 'BEGIN {printf "%.1f", (s>0 ? k*100/s : 0)}')
  gk=$(awk -v s="$sent" -v t=$SECS 'BEGIN {printf "%.0f", s/t/1000}')
  soft=$(awk -v d=$((s1 - s0)) -v hz="$hz" -v n="$sent" -v s=$SECS 'BEGIN {f=n*(s-2)/s; printf "%.0f", (f>0 ? d/hz*1e9/f : 0)}')
  if [ "$tool" = none ]; then win=- whole=- kp=- rss=-; fi
  WIN[$tool]="${WIN[$tool]:-} $win"
  WHOLE[$tool]="${WHOLE[$tool]:-} $whole"
  KEPT[$tool]="${KEPT[$tool]:-} $kp"
  GEN[$tool]="${GEN[$tool]:-} $gk"
  SOFT[$tool]="${SOFT[$tool]:-} $soft"
  echo "| $rep | $tool | $sent | $gk | $soft | $received | $kp | $win | $whole | $late | $rss |"
}

for r in $(seq "$REPS"); do
  for t in $TOOLS; do run "$r" "$t"; done
done
echo
echo "# load after: $(uptime | sed 's/.*load average: //')"
echo "| tool | gen kpps | softirq ns/frame sent | window ns/frame | whole ns/frame | kept % (every rep) |"
echo "|---|---|---|---|---|---|"
# "median (least–most)" of the numbers among the words given.
mr() {
  local v
  v=$(echo "$1" | tr ' ' '\n' | grep -E '^[0-9.]+$' || true)
  [ -z "$v" ] && { echo -; return; }
  echo "$(echo "$v" | median) ($(echo "$v" | sort -g | head -1)–$(echo "$v" | worst))"
}
for t in $TOOLS; do
  echo "| $t | $(mr "${GEN[$t]:-}") | $(mr "${SOFT[$t]:-}") | $(mr "${WIN[$t]:-}") | $(mr "${WHOLE[$t]:-}") | ${KEPT[$t]:-} |"
done
[ -n "${SKIP_CONVERT:-}" ] && exit 0
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
