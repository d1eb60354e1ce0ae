#!/usr/bin/env bash
# Issue 60's comparison with Stenographer in one go: bench/capture_cost.sh
# (weir's default mode, --pcap, stenotype, tcpdump -w and the generator
# alone, interleaved) at 64 B / 300 kpps and at 1514 B at the generator's
# maximum, to the disk and to tmpfs.
#
#   bench/steno.sh [REPS] [DISK_DIR]     (as root; default 5 /var/tmp/weir-bench)
# Each part prints its own setup, table and medians; SIZES="64:300000"
# or DIRS=/dev/shm runs a part only.
set -euo pipefail
here=$(dirname "$0")
REPS=${1:-5}
DISK=${2:-/var/tmp/weir-bench}
SIZES=${SIZES:-64:300000 1514:0}
DIRS=${DIRS:-$DISK /dev/shm}
for d in $DIRS; do
  for s in $SIZES; do
    echo "## ${s%%:*} B at ${s#*:} frames/s (0: the generator's maximum), to $d"
    SKIP_CONVERT=1 "$here/capture_cost.sh" "$REPS" "${s%%:*}" "${s#*:}" "$d"
    echo
  done
done
