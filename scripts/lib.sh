# Shared by scripts/demo.sh and scripts/test.sh: install what is missing on
# a Debian machine (run as root), then build. Sourced, not run.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${WEIR_CACHE:-$HOME/.cache/weir}
# A target directory outside the clone speeds up repeat runs; a fresh
# machine builds from scratch either way.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Debian packages: the C toolchain and libpcap for building, clang and
# libbpf's headers for the eBPF programs (libelf and zlib for the libbpf
# that libbpf-sys builds), the real tools the tests check weir against,
# Python for the Parquet clients, and the font PNG plots are drawn with.
DEB_PACKAGES=(build-essential pkg-config curl ca-certificates git libpcap-dev
  clang libbpf-dev libelf-dev zlib1g-dev
  tcpdump tshark wireshark-common zstd lz4 gzip python3 python3-venv iproute2 util-linux fonts-dejavu-core
  openjdk-17-jre-headless maven)

# Extra packages a script needs beyond these may be given as arguments.
install_packages() {
  [ "$(id -u)" -eq 0 ] || die "run as root (the install step uses apt-get)"
  command -v apt-get >/dev/null || die "apt-get not found: these scripts expect Debian"
  local missing=()
  for p in "${DEB_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

install_rust() {
  if ! command -v cargo >/dev/null || ! command -v rustup >/dev/null; then
    say "installing Rust (rustup, stable toolchain)"
    local init="$CACHE/rustup-init"
    mkdir -p "$CACHE"
    curl -sSfL -o "$init" https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init
    chmod +x "$init"
    "$init" -y --profile minimal --default-toolchain stable >/dev/null
  fi
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
}

# A virtual environment with the real Parquet clients (pyarrow, DuckDB) and
# Spark (pyspark, local mode; Java from the packages above).
install_python() {
  local venv="$CACHE/venv"
  if ! "$venv/bin/python" -c 'import pyarrow, duckdb, pyspark' 2>/dev/null; then
    say "installing pyarrow, duckdb and pyspark into $venv"
    python3 -m venv "$venv" 2>/dev/null || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip >/dev/null
    "$venv/bin/pip" install -q pyarrow duckdb pyspark
  fi
  export WEIR_PYTHON="$venv/bin/python"
}

# The Kafka broker's jars (tools/kafka/pom.xml) from Maven Central, once.
install_kafka() {
  local jars="$CACHE/kafka-jars"
  if [ ! -f "$jars/.complete" ]; then
    say "fetching the Kafka broker (Maven Central) into $jars"
    rm -rf "$jars"
    mvn -q -B -f "$ROOT/tools/kafka/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$jars" >/dev/null
    touch "$jars/.complete"
  fi
  export WEIR_KAFKA_JARS="$jars"
}

build_release() {
  say "building weir (release)"
  (cd "$ROOT" && cargo build --release --locked -p weir)
  WEIR="$CARGO_TARGET_DIR/release/weir"
}
