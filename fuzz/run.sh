#!/usr/bin/env bash
# Fuzzes every cargo-fuzz target in turn for SECONDS each (default 600).
#
#   fuzz/run.sh [SECONDS]
#
# Installs the nightly toolchain and cargo-fuzz if they are missing. New
# corpus entries go to fuzz/corpus/<target>; trace_reader also reads
# tcpdump's test captures (fetched by scripts/test.sh into
# $WEIR_CACHE/test-data/tcpdump-tests, or under WEIR_SHARED_DATA) as a
# read-only seed corpus. Crashes land in
# fuzz/artifacts/<target>/. Exits non-zero if any target found a crash or a
# timeout.
#
# Environment: FUZZ_TARGETS (space-separated subset of targets),
# FUZZ_SEEDS (seed directory for trace_reader), FUZZ_TIMEOUT (seconds one
# input may take before it counts as a hang; default 10), FUZZ_ARGS (extra
# libFuzzer arguments).
set -euo pipefail

secs="${1:-600}"
case "$secs" in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac

fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$fuzz_dir")"
data="${WEIR_SHARED_DATA:-${WEIR_TEST_DATA:-${WEIR_CACHE:-$HOME/.cache/weir}/test-data}}"
seeds="${FUZZ_SEEDS:-$data/tcpdump-tests}"
timeout="${FUZZ_TIMEOUT:-10}"
cd "$root"

if ! command -v rustup >/dev/null; then
    echo "fuzz: rustup is needed to install the nightly toolchain" >&2
    exit 2
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

fuzz=(cargo +nightly fuzz)
if [ -n "${FUZZ_TARGETS:-}" ]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <("${fuzz[@]}" list --fuzz-dir "$fuzz_dir")
fi

build_start=$SECONDS
if [ -n "${FUZZ_TARGETS:-}" ]; then
    for t in "${targets[@]}"; do
        "${fuzz[@]}" build --fuzz-dir "$fuzz_dir" "$t"
    done
else
    "${fuzz[@]}" build --fuzz-dir "$fuzz_dir"
fi
echo "fuzz: build took $((SECONDS - build_start)) s"

failed=()
for t in "${targets[@]}"; do
    corpus="$fuzz_dir/corpus/$t"
    mkdir -p "$corpus"
    dirs=("$corpus")
    # Committed seeds (fuzz/seeds/<target>: e.g. rpc's are segments of the
    # shared NFSv3 trace in the target's input layout) are read, not grown.
    if [ -d "$fuzz_dir/seeds/$t" ]; then
        dirs+=("$fuzz_dir/seeds/$t")
    fi
    if [ "$t" = trace_reader ]; then
        if [ -d "$seeds" ]; then
            dirs+=("$seeds")
        else
            echo "fuzz: no seed captures at $seeds; starting trace_reader from its own corpus" >&2
        fi
    fi
    echo "fuzz: $t for ${secs} s"
    # The first corpus directory receives new inputs; later ones are only read.
    # shellcheck disable=SC2086
    if ! "${fuzz[@]}" run --fuzz-dir "$fuzz_dir" "$t" "${dirs[@]}" -- \
        -max_total_time="$secs" -timeout="$timeout" -print_final_stats=1 ${FUZZ_ARGS:-}; then
        failed+=("$t")
    fi
done

if [ "${#failed[@]}" -ne 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (inputs in $fuzz_dir/artifacts/<target>/; see fuzz/README.md)" >&2
    exit 1
fi
echo "fuzz: no crashes in ${targets[*]}"
