#!/usr/bin/env bash
# Soak (issue 40): `weir capture` in its default mode (pcap and records,
# --compress auto, a --max-disk ring) for SOAK_SECONDS (default 600) at half
# the generator's maximum rate, on a veth pair between two namespaces it
# makes and removes. Prints the capture's resident memory every 10 s, then
# files written and deleted, drops per stage, and whether every file the
# manifest lists reads back whole (each pcap file through zstd and tcpdump,
# the records through weir sql) and `weir verify` finds every file as its
# writer digested it.
#
#   bench/soak.sh [SIZE]        # frame size, default 800
#   SOAK_SECONDS=60 WEIR=target/release/weir bench/soak.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
size=${1:-800}
seconds=${SOAK_SECONDS:-600}
dir=${SOAK_DIR:-/var/tmp/weir-soak}
a=weir-soak-a b=weir-soak-b
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
rm -rf "$dir"
mkdir -p "$dir"
veth_pair "$a" "$b"

# The generator's maximum on this pair, alone, then half of it.
max=$(ip netns exec "$a" "$W" gen -i veth0 --size "$size" --rate max --duration 3s --flows 1000 \
  | grep -o "[0-9.]* Mpps" | head -1 | tr -dc 0-9.)
rate=$(awk -v m="$max" 'BEGIN { printf "%d", m * 1e6 / 2 }')
echo "setup: $(nproc) cores, frames of $size B, generator maximum $max Mpps, soak at $rate frames/s for $seconds s"
echo "capture: -o $dir/ds --compress auto --max-disk 2G (pcap and records, the default)"

ip netns exec "$b" "$W" capture -i veth0 -o "$dir/ds" --compress auto --max-disk 2G \
  --duration "$((seconds + 5))s" udp > "$dir/out.txt" 2> "$dir/err.txt" &
cap=$!
for _ in $(seq 600); do grep -q "capturing on" "$dir/err.txt" 2>/dev/null && break; sleep 0.05; done
pid=$(pgrep -P "$cap" -x weir || echo "$cap")
ip netns exec "$a" "$W" gen -i veth0 --size "$size" --rate "$rate" --duration "${seconds}s" \
  --flows 1000 --payload half-random > "$dir/gen.txt" &
gen=$!
echo "seconds  rss_MiB"
start=$(date +%s)
while kill -0 "$gen" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  printf "%7d  %7.1f\n" "$(( $(date +%s) - start ))" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" \
    | tee -a "$dir/rss.txt"
  sleep 10
done
wait "$gen"
wait "$cap" || echo "weir capture exited with $?"
head -1 "$dir/gen.txt"
grep "weir capture:" "$dir/out.txt" | head -2

# Memory after the first minute, against its median.
python3 - "$dir/rss.txt" <<'EOF'
import sys
v = sorted(float(l.split()[1]) for l in open(sys.argv[1]) if int(l.split()[0]) >= 60)
if not v:
    print("rss: no samples after the first minute")
else:
    med = v[len(v) // 2]
    print(f"rss after 60 s: median {med:.1f} MiB, min {v[0]:.1f}, max {v[-1]:.1f} "
          f"({(v[0] - med) * 100 / med:+.1f}% / {(v[-1] - med) * 100 / med:+.1f}% of the median)")
EOF

python3 - "$dir/ds/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
f = m["files"]
print(f"files: {len(f['pcap'])} pcap kept, {len(f.get('pcap_removed', []))} removed by the ring, "
      f"{len(f['packets'])} records files, {len(f.get('stats', []))} stats files")
print(f"frames: {m['counts']['frames']}; ended by {m['capture']['ended_by']}")
print("drops:", json.dumps(m.get("drops", {})))
EOF

# Every file listed reads back whole.
bad=0
for p in $(python3 -c 'import json,sys; [print(f["path"]) for f in json.load(open(sys.argv[1]))["files"]["pcap"]]' "$dir/ds/manifest.json"); do
  f="$dir/ds/$p"
  want=$(python3 -c 'import json,sys; print(next(x["frames"] for x in json.load(open(sys.argv[1]))["files"]["pcap"] if x["path"] == sys.argv[2]))' "$dir/ds/manifest.json" "$p")
  case "$f" in
    *.zst) got=$(zstd -dc "$f" | tcpdump -nn -r - 2>/dev/null | wc -l) ;;
    *) got=$(tcpdump -nn -r "$f" 2>/dev/null | wc -l) ;;
  esac
  [ "$got" = "$want" ] || { echo "pcap $p: tcpdump reads $got frames, the manifest says $want"; bad=1; }
done
rows=$("$W" sql "$dir/ds" "SELECT count(*) AS n FROM packets" --csv | tail -1)
echo "records: $rows rows readable"
[ "$bad" = 0 ] && echo "every pcap file listed reads back with the frames the manifest gives it"
"$W" verify "$dir/ds" | sed -n '1,3p;$p' || bad=1
