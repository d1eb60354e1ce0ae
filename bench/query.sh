#!/usr/bin/env bash
# `weir read` beside Stenographer's query (issue 61). Both capture the same
# traffic: `weir gen` sends it from one network namespace onto a veth pair,
# and in the other namespace Stenographer (its daemon running stenotype, as
# the Debian package installs them) and `weir capture` (default mode: pcap
# and records) capture it at once. Then the same query, `host H and port P`,
# is asked of both: Stenographer through its HTTPS API with a client
# certificate (curl, TLS handshake included, as stenoread does), weir with
# `weir read DS FILTER -w OUT`. Each is timed warm and with the page cache
# dropped (echo 3 > /proc/sys/vm/drop_caches), interleaved, medians of REPS;
# both answers are checked against tcpdump's reading of the traffic sent
# (`weir gen -w` of the same model and count), frame bytes alone (each
# capture stamps its own times).
#
# Sizes: SMALL IMIX frames over 1,000 TCP flows, LARGE 64-byte frames over
# 100,000 UDP flows; then, weir alone, a HUGE dataset of 64-byte frames over
# 100,000 flows converted with --index-sources (its pcap is HUGE x 80 bytes:
# 16 GB for 200 M; df is checked first and it is deleted after), read warm
# and cold, against weir's warm time on SMALL.
#
#   bench/query.sh [--small 300k] [--large 20M] [--huge 200M|0] [--reps 5]
#                  [--dir /var/tmp/weir-query] [--rate-small 100k] [--rate-large 300k]
#
# Needs root (namespaces, drop_caches), stenographer and stenographer-client
# (Debian), curl, jq, openssl, tcpdump. WEIR=path picks the weir binary.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
W=$(weir_binary)
small=300k large=20M huge=200M reps=5 dir=/var/tmp/weir-query
rate_small=100k rate_large=300k
while [ $# -gt 0 ]; do
  case "$1" in
    --small) small=$2; shift 2 ;;
    --large) large=$2; shift 2 ;;
    --huge) huge=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --rate-small) rate_small=$2; shift 2 ;;
    --rate-large) rate_large=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
for t in stenographer stenotype curl jq openssl tcpdump setpriv; do
  command -v "$t" >/dev/null || { echo "query.sh: needs $t" >&2; exit 2; }
done
a=weir-query-a b=weir-query-b
query_host=10.0.0.5 query_port=1028   # flow 4 of weir gen's models
filter="host $query_host and port $query_port"
steno_pid=
cleanup() {
  if [ -n "$steno_pid" ]; then
    local child
    child=$(pgrep -P "$steno_pid" || true)
    kill "$steno_pid" 2>/dev/null || true
    # stenotype outlives its daemon: stopped by its own PID.
    for p in $child; do kill "$p" 2>/dev/null || true; sleep 1; kill -9 "$p" 2>/dev/null || true; done
    steno_pid=
  fi
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
rm -rf "$dir"
mkdir -p "$dir"

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# Frame bytes of a pcap, one line a frame, sorted: what two captures of
# the same traffic agree on.
frame_bytes() { tcpdump -nn -t -x -r "$1" 2>/dev/null | awk '/^[^\t ]/ {if (p) print p; p=""; next} {p = p $0} END {if (p) print p}' | tr -d ' \t' | sort; }

echo "# weir read beside Stenographer (bench/query.sh), $(date -u +%FT%TZ)"
echo "weir: $W ($("$W" --version)); stenographer $(dpkg-query -W -f '${Version}' stenographer 2>/dev/null || echo '?')"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg); rustc running: $(pgrep -c rustc || true)"
echo "query: '$filter'; $reps repetitions of each, interleaved; times in ms, wall clock of the whole command"

# Stenographer's certificates (CA, server, client), as stenokeys.sh makes
# them, with openssl.
certs=$dir/steno/certs
mkdir -p "$certs"
(
  cd "$certs"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca_key.pem -out ca_cert.pem -days 2 \
    -subj "/CN=weir-query-ca" -addext "basicConstraints=critical,CA:true" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > client.ext
  for who in server client; do
    openssl req -newkey rsa:2048 -nodes -keyout ${who}_key.pem -out $who.csr -subj "/CN=127.0.0.1" 2>/dev/null
    openssl x509 -req -in $who.csr -CA ca_cert.pem -CAkey ca_key.pem -CAcreateserial \
      -out ${who}_cert.pem -days 2 -extfile $who.ext 2>/dev/null
  done
  chmod 644 ./*.pem
)
chown -R stenographer:stenographer "$dir/steno"
steno_query() {  # steno_query OUT: the HTTPS query, as stenocurl makes it
  ip netns exec "$b" curl -s --fail --max-time 600 --cert "$certs/client_cert.pem" \
    --key "$certs/client_key.pem" --cacert "$certs/ca_cert.pem" \
    -d "$filter" "https://127.0.0.1:1234/query" -o "$1"
}

# capture NAME COUNT MODEL_ARGS... : both capture COUNT frames sent at RATE.
capture() {
  local name=$1 count=$2 rate=$3
  shift 3
  local sd=$dir/steno/$name
  mkdir -p "$sd/pkt" "$sd/idx"
  chown -R stenographer:stenographer "$sd"
  cat > "$sd/config" <<EOF
{ "Threads": [ { "PacketsDirectory": "$sd/pkt", "IndexDirectory": "$sd/idx", "DiskFreePercentage": 5 } ],
  "StenotypePath": "/usr/sbin/stenotype", "Interface": "veth0", "Port": 1234, "Host": "127.0.0.1",
  "Flags": [], "CertPath": "$certs" }
EOF
  veth_pair "$a" "$b"
  # The daemon as the package runs it: user stenographer (stenotype is its).
  ip netns exec "$b" setpriv --reuid stenographer --regid stenographer --clear-groups \
    stenographer -config "$sd/config" -syslog=false > "$sd/daemon.log" 2>&1 &
  steno_pid=$!
  # stenotype is ready once its packet socket is (its 2 GiB ring takes a
  # while): sending before that cost it all but 4 MiB of the small run.
  local steno_uid
  steno_uid=$(id -u stenographer)
  for _ in $(seq 300); do
    ip netns exec "$b" awk -v u="$steno_uid" 'NR > 1 && $8 == u {f = 1} END {exit !f}' /proc/net/packet && break
    sleep 0.1
  done
  ip netns exec "$b" "$W" capture -i veth0 -o "$dir/weir-$name" > "$dir/weir-$name.out" 2>&1 &
  local cap=$!
  for _ in $(seq 100); do grep -q "capturing on" "$dir/weir-$name.out" 2>/dev/null && break; sleep 0.1; done
  sleep 2
  local t0
  t0=$(now_ms)
  ip netns exec "$a" "$W" gen -i veth0 "$@" --count "$count" --rate "$rate" > "$dir/gen-$name.out" 2>&1
  echo "$name: sent $count frames ($*) at $rate/s in $(( $(now_ms) - t0 )) ms"
  sleep 2
  kill -INT "$cap"
  wait "$cap" || true
  grep -E "^weir capture|^drops" "$dir/weir-$name.out" | sed "s/^/  /" || true
  # Stenotype rotates its file after a minute; its index follows.
  for _ in $(seq 240); do
    local pkts idxs
    pkts=$(find "$sd/pkt" -maxdepth 1 -type f ! -name '.*' | wc -l)
    idxs=$(find "$sd/idx" -maxdepth 1 -type f ! -name '.*' | wc -l)
    if [ "$pkts" -gt 0 ] && [ "$pkts" = "$idxs" ] && \
       [ -z "$(find "$sd/pkt" -maxdepth 1 -type f -name '.*' -size +0)" ]; then break; fi
    sleep 1
  done
  # The daemon looks for new files every 15 s.
  sleep 16
  echo "  stenographer: $(find "$sd/pkt" -maxdepth 1 -type f ! -name '.*' | wc -l) packet files," \
    "$(du -sb "$sd/pkt" | cut -f1) B of packets, $(du -sb "$sd/idx" | cut -f1) B of index;" \
    "weir: $(du -sb "$dir/weir-$name/packets" | cut -f1) B of records," \
    "$(du -sb "$dir/weir-$name/flows" | cut -f1) B of flows table"
  # The truth: tcpdump's reading of the same frames, generated again.
  "$W" gen "$@" --count "$count" -w "$dir/sent-$name.pcap" > /dev/null 2>&1
  tcpdump -r "$dir/sent-$name.pcap" -w "$dir/truth-$name.pcap" "$filter" 2>/dev/null
  frame_bytes "$dir/truth-$name.pcap" > "$dir/truth-$name.txt"
  rm -f "$dir/sent-$name.pcap"
}

# compare NAME: both answers, warm and cold, REPS each, interleaved.
compare() {
  local name=$1
  local ds=$dir/weir-$name
  local wl="" sl="" wcold="" scold=""
  steno_query "$dir/steno-$name.pcap"
  "$W" read "$ds" "$filter" -w "$dir/weir-$name.pcap" --force 2> "$dir/weir-read-$name.txt"
  local truth ok_w ok_s
  truth=$(wc -l < "$dir/truth-$name.txt")
  ok_w=$(frame_bytes "$dir/weir-$name.pcap" | cmp -s - "$dir/truth-$name.txt" && echo same || echo DIFFERENT)
  ok_s=$(frame_bytes "$dir/steno-$name.pcap" | cmp -s - "$dir/truth-$name.txt" && echo same || echo DIFFERENT)
  echo "  answers: tcpdump $truth frames; weir $(frame_bytes "$dir/weir-$name.pcap" | wc -l) ($ok_w);" \
    "Stenographer $(frame_bytes "$dir/steno-$name.pcap" | wc -l) ($ok_s)"
  sed -n -e 's/^  by the/  weir: by the/p' -e 's/^    (the flows/  weir:   (the flows/p' "$dir/weir-read-$name.txt"
  for _ in $(seq "$reps"); do
    local t
    # Warm: each answered once untimed first (the last repetition's
    # drop_caches left both cold).
    "$W" read -q "$ds" "$filter" -w "$dir/weir-$name.pcap" --force
    steno_query "$dir/steno-$name.pcap"
    t=$(now_ms); "$W" read -q "$ds" "$filter" -w "$dir/weir-$name.pcap" --force; wl="$wl $(( $(now_ms) - t ))"
    t=$(now_ms); steno_query "$dir/steno-$name.pcap"; sl="$sl $(( $(now_ms) - t ))"
    drop_caches
    t=$(now_ms); "$W" read -q "$ds" "$filter" -w "$dir/weir-$name.pcap" --force; wcold="$wcold $(( $(now_ms) - t ))"
    drop_caches
    t=$(now_ms); steno_query "$dir/steno-$name.pcap"; scold="$scold $(( $(now_ms) - t ))"
  done
  echo "  | $name | weir read | Stenographer |"
  echo "  | warm, median (runs) | $(echo "$wl" | median) ($wl ) | $(echo "$sl" | median) ($sl ) |"
  echo "  | cold, median (runs) | $(echo "$wcold" | median) ($wcold ) | $(echo "$scold" | median) ($scold ) |"
  eval "warm_$name=$(echo "$wl" | median)"
}

capture small "$small" "$rate_small" --model imix --flows 1000
compare small
cleanup
if [ "$large" != 0 ]; then
  capture large "$large" "$rate_large" --model fixed --size 64 --flows 100000
  compare large
  cleanup
fi
rm -rf "$dir/steno"

if [ "$huge" != 0 ]; then
  # weir alone on a dataset too large to capture here: generated, converted
  # with its frames kept in place.
  frames=$(numfmt --from=si "${huge^^}")
  need=$(( frames * 90 ))
  free=$(df -B1 --output=avail "$dir" | tail -1)
  if [ "$need" -gt "$free" ]; then
    echo "huge: $huge frames need $((need >> 30)) GiB, $dir has $((free >> 30)) GiB free: skipped"
    exit 0
  fi
  t=$(now_ms)
  "$W" gen --model fixed --size 64 --flows 100000 -c "$huge" -w "$dir/huge.pcap" > /dev/null
  "$W" convert -q --index-sources "$dir/huge.pcap" -o "$dir/weir-huge"
  echo "huge: $huge 64-byte frames over 100,000 flows, generated and converted in $(( $(now_ms) - t )) ms;" \
    "$(du -sb "$dir/weir-huge/packets" | cut -f1) B of records, $(du -sb "$dir/weir-huge/flows" | cut -f1) B of flows table"
  "$W" read "$dir/weir-huge" "$filter" -w "$dir/weir-huge.pcap" --force 2>&1 | sed 's/^/  /'
  hw="" hc=""
  for _ in $(seq "$reps"); do
    t=$(now_ms); "$W" read -q "$dir/weir-huge" "$filter" -w "$dir/weir-huge.pcap" --force; hw="$hw $(( $(now_ms) - t ))"
    drop_caches
    t=$(now_ms); "$W" read -q "$dir/weir-huge" "$filter" -w "$dir/weir-huge.pcap" --force; hc="$hc $(( $(now_ms) - t ))"
  done
  echo "  | huge | weir read warm | cold | warm on small |"
  echo "  | median (runs) | $(echo "$hw" | median) ($hw ) | $(echo "$hc" | median) ($hc ) | ${warm_small:-?} |"
  rm -rf "$dir/huge.pcap" "$dir/weir-huge" "$dir/weir-huge.pcap"
fi
