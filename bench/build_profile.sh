#!/usr/bin/env bash
# Two builds of weir side by side (issue 64: a change of build settings to
# build faster (features, profile, system libraries) must not slow
# conversion, analyses, queries or capture; this shows whether it does).
# On one dataset of `weir gen --model app` (FRAMES frames, converted with --index-sources), the two binaries run
# the same commands, interleaved (A B, then B A, ...), REPS times each:
# `weir convert -j 1` of the trace; the analyses on the default path and
# on the SQL path (`--no-flows-table`, a filter); `weir sql` statements
# (aggregations, a sort, a join-free window); `weir sql "SELECT 1"` (the
# fixed cost of a session and a plan); `weir read` of a 1-s window. Each
# command's CPU time (user + system, /usr/bin/time) and wall time,
# medians, and B's CPU over A's. CPU time does not depend on what else the
# machine runs; wall time does. With CAPTURE=1 (root), also
# bench/capture_quick.sh with 64-B frames, the two alternately, with the
# capture options in CAPTURE_ARGS too (e.g. "--pcap --compress zstd").
#
#   bench/build_profile.sh WEIR_A WEIR_B [FRAMES] [REPS]   (defaults 2M, 5)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
A=${1:?usage: bench/build_profile.sh WEIR_A WEIR_B [FRAMES] [REPS]}
B=${2:?usage: bench/build_profile.sh WEIR_A WEIR_B [FRAMES] [REPS]}
FRAMES=${3:-2M} REPS=${4:-5}
work=$(mktemp -d /tmp/weir-bench-profile.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "# weir build against build: $FRAMES frames of --model app, $REPS reps interleaved, $(nproc) cores"
echo "# A: $A ($(stat -c %s "$A") bytes)"
echo "# B: $B ($(stat -c %s "$B") bytes)"
echo "# load before: $(uptime)"
"$A" gen --model app -c "$FRAMES" --rate 200k --seed 7 -w "$work/trace.pcap" >/dev/null
"$A" convert -q --index-sources "$work/trace.pcap" -o "$work/ds"
ds=$work/ds
mid=$("$A" sql "$ds" "SELECT (min(ts_ns) + max(ts_ns)) / 2 AS m FROM packets" --csv | tail -1)
from=$(python3 -c "import datetime as d; ns=$mid - 500000000; print(d.datetime.fromtimestamp(ns//10**9, d.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')+'.%09dZ' % (ns%10**9))")
to=$(python3 -c "import datetime as d; ns=$mid + 500000000; print(d.datetime.fromtimestamp(ns//10**9, d.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')+'.%09dZ' % (ns%10**9))")

# name|arguments after the binary (@DS@, @OUT@, @TRACE@, @FROM@, @TO@ replaced)
cases=(
  "convert -j 1|convert -q -j 1 --force @TRACE@ -o @OUT@"
  "analyze summary|analyze @DS@ summary"
  "analyze flows|analyze @DS@ flows --limit 0 --csv"
  "analyze flows (SQL)|analyze @DS@ flows --limit 0 --csv --no-flows-table"
  "analyze top pairs, tcp|analyze @DS@ top pairs tcp"
  "analyze rates|analyze @DS@ rates"
  "analyze bursts|analyze @DS@ bursts"
  "analyze dns|analyze @DS@ dns"
  "analyze tls|analyze @DS@ tls"
  "sql group by protocol|sql @DS@ SELECT ip_proto, count(*) AS n, sum(wire_len) AS b FROM packets GROUP BY 1"
  "sql top talkers|sql @DS@ SELECT ip_src, ip_dst, count(*) AS n FROM packets GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 10"
  "sql sort 100k|sql @DS@ SELECT ts_ns, wire_len FROM packets ORDER BY wire_len DESC, ts_ns LIMIT 100000 --csv"
  "sql SELECT 1|sql @DS@ SELECT 1"
  "read 1 s|read -q @DS@ --from @FROM@ --to @TO@ -w @OUT@.pcap --force"
)

run() {  # BINARY ARGS -> "cpu wall" seconds
  local bin=$1 args=$2 out=$work/out-$RANDOM
  args=${args//@DS@/$ds}
  args=${args//@TRACE@/$work/trace.pcap}
  args=${args//@OUT@/$out}
  args=${args//@FROM@/$from}
  args=${args//@TO@/$to}
  local t
  if [[ $args == sql\ * ]]; then
    # The statement is one argument.
    local stmt=${args#sql "$ds" } fmt=
    [[ $stmt == *" --csv" ]] && { stmt=${stmt% --csv}; fmt=--csv; }
    t=$( { /usr/bin/time -f "%U %S %e" "$bin" sql "$ds" "$stmt" $fmt >/dev/null; } 2>&1 | tail -1)
  else
    # shellcheck disable=SC2086 # the words of the command
    t=$( { /usr/bin/time -f "%U %S %e" "$bin" $args >/dev/null; } 2>&1 | tail -1)
  fi
  rm -rf "$out" "$out.pcap"
  awk '{printf "%.3f %.3f\n", $1 + $2, $3}' <<<"$t"
}

printf '%-26s %10s %10s %10s %10s %8s\n' "command" "A cpu (s)" "B cpu (s)" "A wall" "B wall" "B/A cpu"
for c in "${cases[@]}"; do
  name=${c%%|*} args=${c#*|}
  : >"$work/a" ; : >"$work/b"
  for i in $(seq "$REPS"); do
    if (( i % 2 )); then
      run "$A" "$args" >>"$work/a"; run "$B" "$args" >>"$work/b"
    else
      run "$B" "$args" >>"$work/b"; run "$A" "$args" >>"$work/a"
    fi
  done
  ac=$(cut -d' ' -f1 "$work/a" | median) bc=$(cut -d' ' -f1 "$work/b" | median)
  aw=$(cut -d' ' -f2 "$work/a" | median) bw=$(cut -d' ' -f2 "$work/b" | median)
  printf '%-26s %10s %10s %10s %10s %8s\n' "$name" "$ac" "$bc" "$aw" "$bw" \
    "$(awk -v a="$ac" -v b="$bc" 'BEGIN {printf "%.3f", (a > 0) ? b / a : 0}')"
done

if [ "${CAPTURE:-0}" = 1 ]; then
  echo "# capture: bench/capture_quick.sh 64 -o /dev/shm/cq/ds -j 1 ${CAPTURE_ARGS:-}, A and B alternately"
  for i in $(seq "$REPS"); do
    for w in A B; do
      bin=$A; [ $w = B ] && bin=$B
      # shellcheck disable=SC2086 # the options' words
      echo "$w: $(WEIR=$bin "$here/capture_quick.sh" 64 -o /dev/shm/cq/ds -j 1 ${CAPTURE_ARGS:-} | tail -1)"
    done
  done
fi
echo "# load after: $(uptime)"
