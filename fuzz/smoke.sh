#!/usr/bin/env bash
# A short bounded fuzzing run of every target (20 s each by default, or
# FUZZ_SMOKE_SECONDS), for CI and before a push. Exits non-zero if a target
# crashes, panics or hangs. Run from the repository root: fuzz/smoke.sh
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" "${FUZZ_SMOKE_SECONDS:-20}"
