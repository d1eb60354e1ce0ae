#!/usr/bin/env bash
# The DNS, TLS and HTTP decoders of issue 55 against their targets, in one
# run: the decoders alone on one core (DNS messages/s, TLS ClientHellos/s
# with JA3 and JA4, HTTP request heads/s; target >= 5 M DNS and >= 2 M TLS
# a second per core), then `weir convert -j 1` of the app mix (`weir gen
# --model app -w`) with the decoders and with `--no-app`, REPS runs of each
# interleaved, CPU (user + system) per frame, medians and their ratio
# (target <= 1.10). Both parts are bench/src/bin/app.rs; this prints the
# setup beside them. Use release builds of weir and weir-bench:
#
#   cargo build --release -p weir -p weir-bench
#   bench/app.sh [FRAMES] [REPS] [MESSAGES]   (defaults 500000 5 1000000)
set -euo pipefail
T=${CARGO_TARGET_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target}/release
W=${WEIR:-$T/weir}
B=${APP_BENCH:-$T/app}
FRAMES=${1:-500000}
REPS=${2:-5}
MESSAGES=${3:-1000000}
for f in "$W" "$B"; do
  [ -x "$f" ] || {
    echo "bench/app.sh: no $f; build it with cargo build --release -p weir -p weir-bench (or set WEIR / APP_BENCH)" >&2
    exit 2
  }
done
echo "# app decoding: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -r)"
echo "# $("$W" --version | head -1), git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# load before: $(uptime | sed 's/.*load average: //')"
"$B" "$MESSAGES" --weir "$W" --frames "$FRAMES" --reps "$REPS"
echo "# load after: $(uptime | sed 's/.*load average: //')"
