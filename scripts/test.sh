#!/usr/bin/env bash
# Every test: installs what is missing, fetches and records the test data
# (tcpdump's captures, two NFS traces) once into $WEIR_CACHE/test-data, then
# formatting, lints, the unit and end-to-end tests (against tcpdump, tshark,
# pyarrow and DuckDB), and a short fuzzing run of every parser.
# Usage (as root): scripts/test.sh
source "$(dirname "$0")/lib.sh"

started=$(date +%s)
install_packages "${TEST_DATA_PACKAGES[@]}"
install_rust
install_python
install_kafka
install_versitygw
install_duckdb_s3
install_spark_s3
prepare_test_data
cd "$ROOT"

say "cargo fmt --check"
cargo fmt --all -- --check
say "crates depend only along the data flow"
python3 scripts/check-layers.py
# One build serves lints and tests: clippy-driver compiles the workspace's
# own crates (linting them, warnings are errors) while the dependencies are
# built once, not once checked for clippy and once again for the tests.
# The `ci` profile optimises the workspace like release and keeps the
# dependencies (DataFusion above all) cheap to compile (Cargo.toml).
say "cargo test, linted by clippy (-D warnings)"
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" \
  RUSTFLAGS="-D warnings" cargo test --locked --workspace --all-targets --profile ci --no-fail-fast
say "fuzzing smoke run"
fuzz/smoke.sh

say "all tests passed in $(( $(date +%s) - started )) s"
