#!/usr/bin/env bash
# The RPC benchmark (bench/README.md, `rpc`): builds weir and the
# benchmark, then times weir convert with and without RPC decoding on the
# shared NFSv3 trace, interleaved, and weir analyze rpc over a large rpc
# table. Markdown on stdout.
# Usage: scripts/bench-rpc.sh [--reps N] [--copies N]
source "$(dirname "$0")/lib.sh"

install_packages
install_rust
say "building weir and the benchmarks (release)"
(cd "$ROOT" && cargo build --release --locked -p weir -p weir-bench)
exec "$CARGO_TARGET_DIR/release/rpc" --weir "$CARGO_TARGET_DIR/release/weir" \
  --data "$(bench_data_dir)/nfs" "$@"
