#!/usr/bin/env bash
# Every test: installs what is missing, then formatting, lints, the unit and
# end-to-end tests (against tcpdump, tshark, pyarrow and DuckDB), and a short
# fuzzing run of every parser. Usage (as root): scripts/test.sh
source "$(dirname "$0")/lib.sh"

started=$(date +%s)
install_packages
install_rust
install_python
cd "$ROOT"

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy -D warnings"
cargo clippy --locked --workspace --all-targets -- -D warnings
say "cargo test (release: the end-to-end tests convert real traces)"
cargo test --locked --workspace --release
say "fuzzing smoke run"
fuzz/smoke.sh

say "all tests passed in $(( $(date +%s) - started )) s"
