#!/usr/bin/env bash
# The live capture benchmark (bench/README.md, `capture`): installs what is
# missing (tcpdump, netsniff-ng, ...), builds weir and the benchmark, and
# runs weir against tcpdump and netsniff-ng on a veth pair between two
# network namespaces it makes and removes. Markdown on stdout.
# Usage (as root): scripts/bench-capture.sh [capture options, e.g. --quick --json OUT.json]
source "$(dirname "$0")/lib.sh"

install_packages netsniff-ng util-linux
install_rust
say "building weir and the benchmarks (release)"
(cd "$ROOT" && cargo build --release --locked -p weir -p weir-bench)
exec "$CARGO_TARGET_DIR/release/capture" --weir "$CARGO_TARGET_DIR/release/weir" "$@"
