#!/usr/bin/env bash
# The main job end to end on a built-in default: installs what is missing,
# generates a sample trace (TCP and UDP applications), converts it into a
# dataset on every core, and prints what the dataset holds.
# Usage (as root): scripts/demo.sh [FRAMES]   (default 2M)
source "$(dirname "$0")/lib.sh"

frames=${1:-2M}
install_packages
install_rust
build_release

out=${WEIR_DEMO_DIR:-/tmp/weir-demo}
mkdir -p "$out"
say "generating $frames frames of application traffic into $out/sample.pcap"
"$WEIR" gen --model app --count "$frames" --write "$out/sample.pcap"
say "converting it: weir convert $out/sample.pcap -o $out/dataset"
"$WEIR" convert "$out/sample.pcap" -o "$out/dataset" --force
say "what the dataset holds: weir info $out/dataset"
"$WEIR" info "$out/dataset"
echo
echo "The packet records are ordinary Parquet: $out/dataset/packets/*.parquet"
