#!/usr/bin/env bash
# weir serve at the server (issue 52): a dataset of the application mix
# (`weir gen --model app`, converted with --index-sources so that its
# records point at frames), `weir serve` on the loopback, and for the whole
# dataset and for a zoomed window (1 s in the middle) the time each part of
# the page takes to answer (curl's time to the last byte, median of REPS);
# then a pcap download of the 1-s window against `weir read` writing the
# same window to a file, interleaved, medians (the server at --nice 0 for
# this run, as weir read runs: by default it runs at 10); then its CPU while
# idle and while a live page polls it every second (its /proc/PID/stat
# ticks over SECS seconds). Each part is also timed with a one-host
# filter (HOST, default 10.0.0.5) over the whole span.
#
#   bench/serve.sh [FRAMES] [REPS] [SECS]      (defaults 2M, 5, 20)
#
# GEN gives weir gen's model (default "--model app"); issue 61's 200 M
# packets fit this machine's disk as 64-byte frames:
#   GEN="--model fixed --size 64 --flows 100000" bench/serve.sh 200M 3 5
set -euo pipefail
W=${WEIR:-$(cd "$(dirname "$0")/.." && pwd)/target/release/weir}
[ -x "$W" ] || { echo "no weir binary at $W (set WEIR=)" >&2; exit 1; }
FRAMES=${1:-2M} REPS=${2:-5} SECS=${3:-20}
GEN=${GEN:---model app} HOST=${HOST:-10.0.0.5}
work=$(mktemp -d /tmp/weir-bench-serve.XXXXXX)
srv=
cleanup() {
  if [ -n "$srv" ]; then kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "# weir serve benchmark: $FRAMES frames of $GEN, $REPS reps, $(nproc) cores"
echo "# binary: $W ($($W --version))"
echo "# load before: $(uptime)"
# shellcheck disable=SC2086  # GEN is words
"$W" gen $GEN -c "$FRAMES" --rate 200k --seed 7 -w "$work/trace.pcap" >/dev/null
"$W" convert -q --index-sources "$work/trace.pcap" -o "$work/ds"
"$W" info "$work/ds" | sed -n '1,6p' | sed 's/^/# /'
"$W" serve "$work/ds" --listen 127.0.0.1:0 --nice 0 2>"$work/serve.log" &
srv=$!
for _ in $(seq 300); do grep -q "listening on" "$work/serve.log" && break; sleep 0.1; done
addr=$(sed -n 's|.*listening on http://\([^/]*\)/.*|\1|p' "$work/serve.log" | head -1)
[ -n "$addr" ] || { cat "$work/serve.log" >&2; exit 1; }
base="http://$addr"

first=$(curl -sf "$base/api/datasets" | python3 -c 'import json,sys; print(json.load(sys.stdin)["span"]["first_ns"])')
last=$(curl -sf "$base/api/datasets" | python3 -c 'import json,sys; print(json.load(sys.stdin)["span"]["last_ns"])')
mid=$(( (first + last) / 2 ))
zf=$(( mid - 500000000 )) zt=$(( mid + 500000000 ))
echo "# span $(( (last - first) / 1000000 )) ms; zoomed window: 1 s in the middle"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
timed() {  # URL -> median seconds to the last byte
  for _ in $(seq "$REPS"); do
    curl -s -o /dev/null -w '%{time_total}\n' "$1"
  done | median
}

parts=(
  "overview|/api/overview?"
  "top hosts|/api/analysis?name=top&what=hosts&limit=10&"
  "top ports|/api/analysis?name=top&what=ports&limit=10&"
  "top pairs|/api/analysis?name=top&what=pairs&limit=10&"
  "flows (page 1, by bytes)|/api/flows?per=25&sort=fwd_bytes&"
  "packets (page 1)|/api/packets?per=50&"
  "rates|/api/analysis?name=rates&every_ns=100000000&sample_ns=10000000&"
  "bursts|/api/analysis?name=bursts&"
  "loss|/api/analysis?name=loss&"
  "summary|/api/analysis?name=summary&"
)
host_filter=$(python3 -c "import urllib.parse; print(urllib.parse.quote('host $HOST'))")
printf '%-26s %12s %14s %14s\n' "part" "whole (s)" "1-s window (s)" "host $HOST (s)"
for p in "${parts[@]}"; do
  name=${p%%|*} path=${p#*|}
  whole=$(timed "$base${path}")
  zoom=$(timed "$base${path}from=$zf&to=$zt")
  host=$(timed "$base${path}filter=$host_filter")
  printf '%-26s %12s %14s %14s\n' "$name" "$whole" "$zoom" "$host"
done

echo "# pcap of the 1-s window: download (to a file) vs weir read -w, interleaved"
from=$(python3 -c "import datetime as d; ns=$zf; print(d.datetime.fromtimestamp(ns//10**9, d.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')+'.%09dZ' % (ns%10**9))")
to=$(python3 -c "import datetime as d; ns=$zt; print(d.datetime.fromtimestamp(ns//10**9, d.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')+'.%09dZ' % (ns%10**9))")
: >"$work/dl" ; : >"$work/rd"
for _ in $(seq "$REPS"); do
  curl -s -o "$work/dl.pcap" -w '%{time_total}\n' "$base/api/pcap?from=$zf&to=$zt" >>"$work/dl"
  s=$(date +%s%N)
  "$W" read -q "$work/ds" --from "$from" --to "$to" -w "$work/rd.pcap" --force
  awk -v a="$s" -v b="$(date +%s%N)" 'BEGIN {printf "%.4f\n", (b - a) / 1e9}' >>"$work/rd"
done
cmp -s "$work/dl.pcap" "$work/rd.pcap" && same="byte-identical" || same="DIFFERENT"
echo "download  $(median <"$work/dl") s   weir read  $(median <"$work/rd") s   ($(stat -c %s "$work/rd.pcap") bytes, $same)"

ticks() { awk '{print $14 + $15}' "/proc/$srv/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks); sleep "$SECS"; t1=$(ticks)
pct() { awk -v t="$1" -v hz="$hz" -v s="$SECS" 'BEGIN {printf "%.3f", 100 * t / hz / s}'; }
echo "idle: $(( t1 - t0 )) ticks of 1/$hz s in $SECS s ($(pct $(( t1 - t0 ))) % of a core)"
t0=$(ticks)
for _ in $(seq "$SECS"); do curl -s -o /dev/null "$base/api/datasets"; sleep 1; done
t1=$(ticks)
echo "a live page's poll (/api/datasets each second): $(pct $(( t1 - t0 ))) % of a core"
echo "# load after: $(uptime)"
