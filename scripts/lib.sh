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
# Python for the Parquet clients, the font PNG plots are drawn with, and
# what the package test needs (dpkg-shlibdeps, lintian, man, systemd-analyze).
DEB_PACKAGES=(build-essential pkg-config curl ca-certificates git libpcap-dev
  clang libbpf-dev libelf-dev zlib1g-dev
  tcpdump tshark wireshark-common zstd lz4 gzip b3sum openssh-client python3 python3-venv iproute2 util-linux fonts-dejavu-core
  openjdk-17-jre-headless maven
  chromium chromium-driver dpkg-dev lintian man-db systemd)

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

# DuckDB reads a bucket through its httpfs extension, which PyPI ships as
# a package of its own whose version follows DuckDB's; its newest there
# (1.5.5) lags the venv's duckdb, so the bucket test has a small venv of
# its own with both at that version.
DUCKDB_S3_VERSION=1.5.5
install_duckdb_s3() {
  local venv="$CACHE/venv-duckdb-s3"
  if [ "$(cat "$venv/.version" 2>/dev/null)" != "$DUCKDB_S3_VERSION" ]; then
    say "installing duckdb $DUCKDB_S3_VERSION and its httpfs extension into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" 2>/dev/null || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q "duckdb==$DUCKDB_S3_VERSION" "duckdb-extension-httpfs==$DUCKDB_S3_VERSION"
    echo "$DUCKDB_S3_VERSION" > "$venv/.version"
  fi
  export WEIR_DUCKDB_S3_PYTHON="$venv/bin/python"
}

# Spark's S3A connector (tools/s3/spark-pom.xml) from Maven Central, once.
install_spark_s3() {
  local jars="$CACHE/spark-s3-jars"
  local recipe
  recipe=$(sha256sum "$ROOT/tools/s3/spark-pom.xml" | cut -c1-16)
  if [ "$(cat "$jars/.complete" 2>/dev/null)" != "$recipe" ]; then
    say "fetching Spark's S3A connector (Maven Central) into $jars"
    rm -rf "$jars"
    mvn -q -B -f "$ROOT/tools/s3/spark-pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$jars" >/dev/null
    echo "$recipe" > "$jars/.complete"
  fi
  export WEIR_SPARK_S3_JARS="$jars"
}

# The S3 server the object-storage tests and benchmarks run (versitygw,
# Apache-2.0: its posix backend on a test's directory), built once with Go
# from the module proxy. Go is the machine's (/usr/local/go), else Debian's.
VERSITYGW_VERSION=v1.8.0
install_versitygw() {
  local bin="$CACHE/versitygw/bin/versitygw"
  if [ ! -x "$bin" ] || [ "$(cat "$CACHE/versitygw/.version" 2>/dev/null)" != "$VERSITYGW_VERSION" ]; then
    say "building versitygw $VERSITYGW_VERSION (go install) into $CACHE/versitygw"
    local go
    go=$(command -v go || true)
    [ -z "$go" ] && [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
    if [ -z "$go" ]; then
      install_packages golang-go
      go=$(command -v go)
    fi
    mkdir -p "$CACHE/versitygw"
    GOBIN="$CACHE/versitygw/bin" GOFLAGS=-buildvcs=false GOTOOLCHAIN=auto \
      "$go" install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
    echo "$VERSITYGW_VERSION" > "$CACHE/versitygw/.version"
  fi
  export WEIR_VERSITYGW="$bin"
}

# The data the tests read, made or fetched once into $CACHE/test-data (a
# clone has nothing beside it): tcpdump's test captures from Debian's tcpdump
# source package, and two NFS traces recorded here between a real NFS server
# and real clients (tests/nfs). Exports WEIR_TEST_DATA. WEIR_SHARED_DATA,
# when set, points the tests at larger data of the same layout instead.
TEST_DATA_PACKAGES=(nfs-ganesha nfs-ganesha-vfs libnfs-utils libnfs-dev rpcbind ethtool)

prepare_test_data() {
  local data="$CACHE/test-data"
  mkdir -p "$data"
  fetch_tcpdump_tests "$data/tcpdump-tests"
  record_nfs_traces "$data/nfs"
  export WEIR_TEST_DATA="$data"
}

# tests/ of Debian bookworm's tcpdump source package, fetched with
# `apt-get source --download-only` against a sources list of our own (the
# system's apt configuration is not touched); apt checks the index's
# signature with Debian's archive keyring and the files' hashes against it.
fetch_tcpdump_tests() {
  local out=$1
  [ -f "$out/.complete" ] && return 0
  say "fetching tcpdump's test captures (Debian source package) into $out"
  local apt="$CACHE/apt-src"
  rm -rf "$apt" "$out"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" "$apt/get"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
    > "$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/sources.list.d"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=root" -qq)
  apt-get "${opts[@]}" update
  (cd "$apt/get" && apt-get "${opts[@]}" source --download-only tcpdump >/dev/null)
  local orig
  orig=$(ls "$apt"/get/tcpdump_*.orig.tar.* | head -n 1)
  [ -n "$orig" ] || die "apt-get source tcpdump gave no .orig tarball in $apt/get"
  local tmp="$out.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  tar -xf "$orig" -C "$tmp" --strip-components=2 --wildcards '*/tests/*.pcap' '*/tests/*.pcapng'
  tar -xf "$orig" -C "$tmp" --strip-components=1 --wildcards '*/LICENSE'
  local n
  n=$(find "$tmp" -maxdepth 1 -name '*.pcap*' | wc -l)
  [ "$n" -ge 300 ] || die "only $n captures in $orig; expected several hundred"
  basename "$orig" > "$tmp/.complete"
  mv "$tmp" "$out"
  rm -rf "$apt"
}

# Two NFS traces (NFSv3 with every procedure, NFSv4 COMPOUNDs) recorded by
# tests/nfs/make-traces.sh; recorded again when that recipe changes.
record_nfs_traces() {
  local out=$1
  local recipe
  recipe=$(cd "$ROOT/tests/nfs" && find . -type f ! -name README.md | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
  [ "$(cat "$out/.complete" 2>/dev/null)" = "$recipe" ] && return 0
  say "recording the NFS test traces (tests/nfs/make-traces.sh) into $out"
  rm -rf "$out" "$out.tmp"
  mkdir -p "$out.tmp"
  "$ROOT/tests/nfs/make-traces.sh" "$out.tmp"
  echo "$recipe" > "$out.tmp/.complete"
  mv "$out.tmp" "$out"
}

# The data a benchmark reads (as bench/src/lib.rs default_data_dir):
# WEIR_SHARED_DATA, else ../shared/data beside the clone, else the test data,
# fetched and recorded first when missing.
bench_data_dir() {
  if [ -n "${WEIR_SHARED_DATA:-}" ]; then
    echo "$WEIR_SHARED_DATA"
  elif [ -d "$ROOT/../shared/data" ]; then
    (cd "$ROOT/../shared/data" && pwd)
  else
    install_packages "${TEST_DATA_PACKAGES[@]}" >&2
    prepare_test_data >&2
    echo "$CACHE/test-data"
  fi
}

build_release() {
  say "building weir (release)"
  (cd "$ROOT" && cargo build --release --locked -p weir)
  WEIR="$CARGO_TARGET_DIR/release/weir"
}
