#!/usr/bin/env bash
# Builds weir's Debian package: /usr/bin/weir stripped, man pages for weir
# and every subcommand and bash/zsh/fish completions (both generated from
# the CLI definition by `weir generate-docs`), the service unit
# weir-capture@.service, the weir user (sysusers.d), its state directory
# (tmpfiles.d) and an example configuration; then lintian, when installed,
# must report no errors.
#
#   scripts/build-deb.sh [--binary PATH] [--out DIR] [--fast] [--no-lintian]
#
# Without --binary it builds the release binary first (cargo build
# --release -p weir; 20 minutes or more on two cores). With --binary it
# packages that one (the package test packages the binary its own run
# built). The package goes to DIR (default: target/deb); its path is the
# last line printed. --fast compresses with gzip -1 instead of xz (for
# tests: xz takes minutes over a binary this size on two cores).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
binary=""
out="$ROOT/target/deb"
lint=1
compress=(-Zxz)
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --no-lintian) lint=0; shift ;;
    --fast) compress=(-Zgzip -z1); shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "build-deb.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

started=$(date +%s)
if [ -z "$binary" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
  (cd "$ROOT" && cargo build --release -p weir)
  binary="${CARGO_TARGET_DIR:-$ROOT/target}/release/weir"
fi
[ -x "$binary" ] || { echo "build-deb.sh: $binary is not an executable (give --binary PATH)" >&2; exit 2; }
for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
  command -v "$tool" >/dev/null || {
    echo "build-deb.sh: $tool is missing (apt-get install dpkg-dev binutils gzip)" >&2; exit 2; }
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
arch=$(dpkg --print-architecture)
# Reproducible dates: the last commit's, when there is one.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg="$work/root"
doc="$pkg/usr/share/doc/weir"

install -d -m 0755 "$pkg/usr/bin" "$doc/examples" "$pkg/usr/share/man/man1" \
  "$pkg/lib/systemd/system" "$pkg/usr/lib/sysusers.d" "$pkg/usr/lib/tmpfiles.d" \
  "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
  "$pkg/usr/share/fish/vendor_completions.d" "$pkg/etc/weir" "$pkg/DEBIAN"
install -m 0755 "$binary" "$pkg/usr/bin/weir"
# No debug information, no symbol table beyond what linking needs (as
# dh_strip does).
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$pkg/usr/bin/weir"

"$pkg/usr/bin/weir" generate-docs --out "$work/docs"
for page in "$work/docs/man/"*.1; do
  gzip -9n -c "$page" > "$pkg/usr/share/man/man1/$(basename "$page").gz"
done
install -m 0644 "$work/docs/completions/weir.bash" "$pkg/usr/share/bash-completion/completions/weir"
install -m 0644 "$work/docs/completions/_weir" "$pkg/usr/share/zsh/vendor-completions/_weir"
install -m 0644 "$work/docs/completions/weir.fish" "$pkg/usr/share/fish/vendor_completions.d/weir.fish"

install -m 0644 "$ROOT/packaging/weir-capture@.service" "$pkg/lib/systemd/system/"
install -m 0644 "$ROOT/packaging/weir.sysusers" "$pkg/usr/lib/sysusers.d/weir.conf"
install -m 0644 "$ROOT/packaging/weir.tmpfiles" "$pkg/usr/lib/tmpfiles.d/weir.conf"
install -m 0644 "$ROOT/packaging/example.toml" "$doc/examples/capture.toml"

cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: weir
Source: https://github.com/weir-capture/weir

Files: *
Copyright: 2025-2026 the weir authors
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this file except in compliance with the License.
 .
 On Debian systems, the full text of the Apache License, Version 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
chmod 0644 "$doc/copyright"
maintainer="weir maintainers <weir@weir-capture.github.io>"
{
  echo "weir ($version) unstable; urgency=medium"
  echo
  echo "  * Built from the weir repository by scripts/build-deb.sh."
  echo
  echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# The libraries the binary links, as dpkg-shlibdeps finds them.
mkdir -p "$work/src/debian"
printf 'Source: weir\n\nPackage: weir\nArchitecture: any\n' > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O "$pkg/usr/bin/weir" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')

cat > "$pkg/DEBIAN/control" <<EOF
Package: weir
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
Depends: $depends
Recommends: systemd
Section: net
Priority: optional
Homepage: https://github.com/weir-capture/weir
Description: line-rate packet capture and analysis
 weir captures on all cores into a dataset of pcap files and packet
 records (Parquet), analyses it (SQL, built-in analyses), and hands it on
 with an integrity record signed in OpenSSH's signature format.
 .
 The package brings the weir command with its man pages and shell
 completions, and weir-capture@.service: a capture per configuration in
 /etc/weir, run as the weir user with CAP_NET_RAW only.
EOF

cat > "$pkg/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = "configure" ]; then
    systemd-sysusers weir.conf
    systemd-tmpfiles --create weir.conf
    if [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
    fi
fi
EOF
cat > "$pkg/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then
    systemctl stop 'weir-capture@*.service' >/dev/null 2>&1 || true
fi
EOF
cat > "$pkg/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
  sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/md5sums"
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb="$out/weir_${version}_${arch}.deb"
dpkg-deb --root-owner-group "${compress[@]}" --build "$pkg" "$deb" >/dev/null
size=$(stat -c %s "$pkg/usr/bin/weir")
echo "build-deb.sh: /usr/bin/weir is $size bytes ($((size >> 20)) MiB), the package $(stat -c %s "$deb") bytes" >&2
if [ "$lint" = 1 ]; then
  if command -v lintian >/dev/null; then
    # Errors fail the build; warnings are printed.
    lintian --fail-on error --suppress-tags-from-file /dev/null "$deb" >&2
  else
    echo "build-deb.sh: lintian is not installed (apt-get install lintian): not checked" >&2
  fi
fi
echo "build-deb.sh: built in $(( $(date +%s) - started )) s" >&2
echo "$deb"
