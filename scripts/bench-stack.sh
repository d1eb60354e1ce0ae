#!/usr/bin/env bash
# The host-stack benchmark (bench/README.md, `stack`): installs what is
# missing (iperf3, tcpdump), builds weir and the benchmark, and measures TCP
# throughput between two network namespaces it makes and removes, with and
# without `weir stack` recording and beside tcpdump, interleaved. Markdown on
# stdout.
# Usage (as root): scripts/bench-stack.sh [--seconds N] [--reps N] [--json OUT.json]
source "$(dirname "$0")/lib.sh"

install_packages iperf3 tcpdump
install_rust
say "building weir and the benchmarks (release)"
(cd "$ROOT" && cargo build --release --locked -p weir -p weir-bench)
exec "$CARGO_TARGET_DIR/release/stack" --weir "$CARGO_TARGET_DIR/release/weir" "$@"
