#!/usr/bin/env bash
# Where a live capture's CPU goes, by stage (issue 60): `weir capture`
# (default flags, -B 256 MiB) pinned to CPU 1, an independent `weir gen`
# pinned to CPU 0 sending SIZE-byte frames over 1,024 flows at RATE
# frames/s (0: its maximum) for 10 s over a veth pair between two
# namespaces this script makes and removes; `perf record -e cpu-clock`
# samples the capture from 3 s into the traffic for 5 s. The samples are
# split by stage from their thread and function:
#   ring -> staging   the capture thread (weir-capN) outside the kernel
#   capture, kernel   the capture thread in the kernel (poll, ring)
#   digest            BLAKE3, wherever it runs
#   write             the pcap writer thread (weir-pcap-*) but the digest
#   decode, flows, app, encode, records other
#                     the records thread (weir-recN) by function
#   other             everything else
# and printed as ns per frame captured (the process's CPU over the window
# split in the samples' proportions), with the top functions of each.
#
#   bench/capture_profile.sh [SIZE] [RATE] [DIR] [weir capture options...]   (as root)
#   bench/capture_profile.sh 64 300000 /var/tmp/weir
#   bench/capture_profile.sh 1514 0 /var/tmp/weir
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
SIZE=${1:-64}
RATE=${2:-300000}
DIR=${3:-/var/tmp/weir-profile}
shift $(( $# < 3 ? $# : 3 ))
a=weir-cp-a-$$ b=weir-cp-b-$$
mkdir -p "$DIR"
work=$DIR/weir-capture-profile-$$
cleanup() {
  [ -n "${cap:-}" ] && kill -INT "$cap" 2>/dev/null && sleep 1
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
veth_pair "$a" "$b"
mkdir -p "$work"
rate_arg=()
[ "$RATE" != 0 ] && rate_arg=(--rate "$RATE")
echo "# capture profile: $(nproc) cores, $(uname -r), weir $("$W" --version 2>/dev/null | head -1)"
echo "# weir capture -i veth0 -o DS -B 262144 $* udp; $SIZE-byte frames, rate ${RATE/#0/max}, to $DIR ($(stat -f -c %T "$DIR"))"
echo "# load: $(uptime | sed 's/.*load average: //'); rustc processes: $(pgrep -c rustc || true)"
ip netns exec "$b" taskset -c 1 "$W" capture -i veth0 -o "$work/ds" -B 262144 "$@" udp \
  >"$work/out.txt" 2>"$work/err.txt" &
cap=$!
for _ in $(seq 400); do grep -q "capturing on" "$work/err.txt" 2>/dev/null && break; sleep 0.025; done
sleep 1
ip netns exec "$a" taskset -c 0 "$W" gen -i veth0 --size "$SIZE" "${rate_arg[@]}" --duration 10s \
  --flows 1024 --payload half-random >"$work/gen.txt" 2>&1 &
g=$!
sleep 3
t0=$(awk '{print $14+$15}' "/proc/$cap/stat")
perf record -e cpu-clock -F 2000 -g -p "$cap" -o "$work/perf.data" -- sleep 5 2>"$work/perf.err" >/dev/null
t1=$(awk '{print $14+$15}' "/proc/$cap/stat")
wait "$g" || true
sleep 0.5
kill -INT "$cap"
wait "$cap" || true
cap=
sent=$(grep -oE "sent [0-9,]+ frames" "$work/gen.txt" | head -1 | tr -dc 0-9)
frames=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['counts']['frames'])" "$work/ds/manifest.json")
hz=$(getconf CLK_TCK)
# Frames in the 5 s window: its share of the 10 s of traffic.
cpu_ns=$(awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN {printf "%.0f", d/hz*1e9}')
echo "# sent $sent, captured $frames; the process's CPU in the window: $((cpu_ns / 1000000)) ms"
perf report -i "$work/perf.data" --no-children --sort comm,dso,sym -F overhead,comm,dso,sym \
  --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' >"$work/rows.txt" || true
python3 - "$work/rows.txt" "$cpu_ns" "$frames" <<'EOF'
import re, sys
rows, cpu_ns, frames = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
window_frames = frames * 5 / 10
def stage(comm, dso, sym):
    s = sym.lower()
    if 'blake3' in s:
        return 'digest'
    if comm.startswith('weir-cap'):
        return 'capture, kernel' if dso.startswith('[kernel') else 'ring -> staging'
    if comm.startswith('weir-pcap'):
        return 'write'
    if comm.startswith('weir-rec'):
        if re.search(r'parquet|arrow|encode|snap|zstd|lz4|column|rle|bitpack', s):
            return 'encode'
        if re.search(r'app::|dns|tls|http|track', s):
            return 'app'
        if re.search(r'flow', s):
            return 'flows'
        if re.search(r'wire::|decode', s):
            return 'decode'
        return 'records other'
    return 'other'
stages, tops = {}, {}
for line in open(rows):
    m = re.match(r'\s*([\d.]+)%\s+(\S+)\s+(\S+)\s+\[.\]\s+(.*)', line)
    if not m:
        continue
    pct, comm, dso, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
    st = stage(comm, dso, sym)
    stages[st] = stages.get(st, 0) + pct
    tops.setdefault(st, []).append((pct, f'{comm} {sym[:70]}'))
total = sum(stages.values()) or 1
print(f'| stage | share of samples | ns per frame |')
print(f'|---|--:|--:|')
order = ['ring -> staging', 'capture, kernel', 'digest', 'write', 'decode', 'flows', 'app', 'encode', 'records other', 'other']
for st in order:
    if st in stages:
        share = stages[st] / total
        print(f'| {st} | {share*100:.1f} % | {share*cpu_ns/max(window_frames,1):.0f} |')
print(f'| all | 100 % | {cpu_ns/max(window_frames,1):.0f} |')
print()
for st in order:
    if st in tops:
        top = sorted(tops[st], reverse=True)[:5]
        print(f'{st}: ' + '; '.join(f'{p:.1f}% {n}' for p, n in top))
EOF
