#!/usr/bin/env bash
# The merge benchmark: two "boxes" that both saw the shared NFSv3 trace, the
# second on a clock 5 ms ahead (editcap -t), converted to datasets, then
# merged with duplicate removal, merged keeping every frame, and, for
# scale, the two pcap files merged by mergecap (time order only, no
# duplicate check). Interleaved repetitions; medians. Markdown on stdout.
# Usage: scripts/bench-merge.sh [--reps N]
source "$(dirname "$0")/lib.sh"

reps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    *) die "unknown option $1 (use --reps N)" ;;
  esac
done
install_packages
install_rust
build_release
data="$(bench_data_dir)/nfs"
work="$(mktemp -d /tmp/weir-bench-merge.XXXXXX)"
trap 'rm -rf "$work"' EXIT
zstd -dq "$data/nfsv3.pcap.zst" -o "$work/a.pcap"
editcap -t 0.005 "$work/a.pcap" "$work/b.pcap"
for x in a b; do "$WEIR" convert -q --no-rpc "$work/$x.pcap" -o "$work/$x"; done
frames=$(( $(capinfos -c -M "$work/a.pcap" | awk '/Number of packets/{print $NF}') * 2 ))

# One timing: wall seconds of a command.
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || die "failed: $*"; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN {printf "%.3f", e - s}'; }
declare -A runs
for r in $(seq "$reps"); do
  rm -rf "$work/m1" "$work/m2" "$work/m.pcap"
  runs[dedup]+="$(t "$WEIR" merge -q "$work/a" "$work/b" -o "$work/m1") "
  runs[keep]+="$(t "$WEIR" merge -q --keep-duplicates "$work/a" "$work/b" -o "$work/m2") "
  runs[mergecap]+="$(t mergecap -w "$work/m.pcap" "$work/a.pcap" "$work/b.pcap") "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "Two inputs of $((frames / 2)) frames each (the NFSv3 trace twice, the second 5 ms ahead); $reps runs, $(nproc) cores."
echo
echo "| merge | median s | input frames/s | all runs (s) |"
echo "|---|--:|--:|---|"
for k in dedup keep mergecap; do
  m=$(echo "${runs[$k]}" | median)
  label=$k
  [ "$k" = dedup ] && label="weir merge (duplicates removed)"
  [ "$k" = keep ] && label="weir merge --keep-duplicates"
  [ "$k" = mergecap ] && label="mergecap of the two pcap files"
  printf '| %s | %.3f | %.2f M | %s|\n' "$label" "$m" "$(awk -v f="$frames" -v m="$m" 'BEGIN {print f / m / 1e6}')" "${runs[$k]}"
done
echo
"$WEIR" info "$work/m1" | grep -E "merged|input"
