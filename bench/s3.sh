#!/usr/bin/env bash
# Datasets on S3-compatible object storage (issue 62), against a real S3
# server on the loopback (versitygw, its posix backend under DIR), side by
# side in one run:
#   1. upload vs capture: `weir capture --upload` of 1514-byte frames at
#      RATE1 frames/s (82,000: 1 Gb/s) for SECS s, sent by `weir gen` on a
#      veth pair between two namespaces this script makes (both ends in
#      them, bounded in count). Reported: the uploader's CPU time (the
#      manifest's upload.cpu_s) per second of capture, as % of a core; the
#      longest lag from a file's sealing to its upload; the backlog at the
#      end (0: it kept pace).
#   2. reads over the bucket vs the local disk: a capture of FRAMES2
#      64-byte frames (pcap and records) uploaded with --keep-local, then
#      `weir read DS FILTER -w /dev/null` and `weir analyze DS flows`
#      over s3:// and over the directory, interleaved, REPS each; medians
#      and their ratio (target <= 2).
#   3. 8 datasets under one prefix vs their merged copy: 8 conversions of
#      generated traces uploaded to s3://bench/site/sK, their copy merged
#      locally and uploaded; a query over s3://bench/site/ and over the
#      copy, interleaved, REPS each (target: the prefix no slower).
#
#   bench/s3.sh [REPS] [DIR]          (as root; DIR on a real disk)
#   bench/s3.sh 5 /var/tmp/weir-s3
# Env: RATE1 (82000), SECS (20), FRAMES2 (20000000), SHARD_FRAMES (2500000).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../scripts/lib.sh"
install_versitygw
W=$(weir_binary)
REPS=${1:-5}
DIR=${2:-/var/tmp/weir-s3-bench}
RATE1=${RATE1:-82000}
SECS=${SECS:-20}
FRAMES2=${FRAMES2:-20000000}
SHARD_FRAMES=${SHARD_FRAMES:-2500000}
a=weir-s3b-a-$$ b=weir-s3b-b-$$
work=$DIR/run-$$
PORT=17090
export AWS_ACCESS_KEY_ID=benchaccess AWS_SECRET_ACCESS_KEY=benchsecret-0123456789
export AWS_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
gw=
cleanup() {
  [ -n "$gw" ] && kill "$gw" 2>/dev/null || true
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/s3/bench"
veth_pair "$a" "$b"
# The server runs in the capture's namespace: its loopback is the
# capture's, and the later steps run there too.
in_a() { ip netns exec "$a" "$@"; }
ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
  ip netns exec "$a" "$WEIR_VERSITYGW" --port "127.0.0.1:$PORT" --quiet posix "$work/s3" \
  > "$work/versitygw.log" 2>&1 &
gw=$!
for _ in $(seq 100); do in_a bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && break; sleep 0.1; done
echo "setup: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), weir $W, versitygw $VERSITYGW_VERSION on the loopback, data under $DIR"
secs() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }

# 1. Upload against a capture at 1 Gb/s.
echo "== 1. upload while capturing ${RATE1} frames/s of 1514 B for ${SECS} s"
in_a "$W" capture -q -i veth0 -o "$work/cap1" --rotate-time 2s --records-every 2s \
  --duration "$((SECS + 3))s" --upload s3://bench/cap1 udp &
cap=$!
sleep 2
ip netns exec "$b" "$W" gen -i veth0 --rate "$RATE1" --size 1514 --flows 64 \
  --count "$((RATE1 * SECS))" > /dev/null
wait "$cap"
in_a "$W" info --json s3://bench/cap1 > "$work/cap1.json"
python3 - "$work/cap1.json" "$SECS" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); u = m["upload"]; secs = float(sys.argv[2])
print(f"  frames {m['counts']['frames']}, uploaded {u['files']} files, {u['bytes']/1e9:.2f} GB, "
      f"{u['failures']} failures, backlog at the end {u['backlog_files']} files")
print(f"  uploader CPU {u['cpu_s']:.2f} s over {secs:.0f} s: {100*u['cpu_s']/secs:.1f} % of a core "
      f"(target <= 5 %); lag from seal to upload: longest {u['lag_ms_max']} ms")
EOF

# 2. Reads over the bucket against the same dataset on the local disk.
echo "== 2. read and analyze: ${FRAMES2} frames, over s3:// and over the directory"
in_a "$W" capture -q -i veth0 -o "$work/cap2" --upload s3://bench/cap2 --keep-local \
  --count "$FRAMES2" --duration 600s udp &
cap=$!
sleep 2
ip netns exec "$b" "$W" gen -i veth0 --rate 400000 --size 64 --flows 4096 \
  --count "$((FRAMES2 + 200000))" > /dev/null || true
wait "$cap" || true
in_a "$W" info s3://bench/cap2 | head -3
port=$(in_a "$W" analyze --json "$work/cap2" top ports --limit 5 | python3 -c \
  'import json,sys; r=json.load(sys.stdin); r=r.get("top",r) if isinstance(r,dict) else r; print(r[-1]["port"])')
FILTER="udp port $port"
echo "  filter: $FILTER"
declare -A t
for k in $(seq "$REPS"); do
  for where in local s3; do
    ds=$work/cap2; [ "$where" = s3 ] && ds=s3://bench/cap2
    t[read-$where]+=" $(in_a bash -c "$(declare -f secs); secs '$W' read -q '$ds' '$FILTER' -w /dev/null")"
    t[flows-$where]+=" $(in_a bash -c "$(declare -f secs); secs '$W' analyze --json '$ds' flows")"
  done
done
for what in read flows; do
  l=$(echo "${t[$what-local]}" | median); r=$(echo "${t[$what-s3]}" | median)
  echo "  $what: local $l s, s3 $r s, ratio $(python3 -c "print(f'{$r/$l:.2f}')") (target <= 2)  [local:${t[$what-local]} s3:${t[$what-s3]}]"
done

# 3. Eight datasets under one prefix against their merged copy.
echo "== 3. 8 datasets of ${SHARD_FRAMES} frames under one prefix vs their merged copy"
for k in 0 1 2 3 4 5 6 7; do
  "$W" gen -w "$work/t$k.pcap" --model app -c "$SHARD_FRAMES" --seed "$k" > /dev/null
  in_a "$W" convert -q -o "$work/shard$k" --keep-local --upload "s3://bench/site/s$k" "$work/t$k.pcap"
  rm -f "$work/t$k.pcap"
done
"$W" merge -q --keep-duplicates "$work"/shard[0-7] -o "$work/merged"
in_a "$W" upload "$work/merged" s3://bench/merged
Q="SELECT ip_proto, count(*) AS n, sum(wire_len) AS b FROM packets GROUP BY ip_proto ORDER BY n DESC"
for k in $(seq "$REPS"); do
  for ds in s3://bench/site/ s3://bench/merged; do
    t[q-$ds]+=" $(in_a bash -c "$(declare -f secs); secs '$W' sql --json '$ds' '$Q'")"
    t[f-$ds]+=" $(in_a bash -c "$(declare -f secs); secs '$W' analyze --json '$ds' flows")"
  done
done
for what in q f; do
  p=$(echo "${t[$what-s3://bench/site/]}" | median); m=$(echo "${t[$what-s3://bench/merged]}" | median)
  name=$([ $what = q ] && echo "sql group by" || echo "analyze flows")
  echo "  $name: prefix of 8 $p s, merged copy $m s, ratio $(python3 -c "print(f'{$p/$m:.2f}')") (target <= 1)"
done
