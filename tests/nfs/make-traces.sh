#!/bin/bash
# Records two small real NFS packet traces, OUTDIR/nfsv3.pcap.zst and
# OUTDIR/nfsv4.pcap.zst (see README.md):
#
#   sudo tests/nfs/make-traces.sh OUTDIR
#
# Needs root and these Debian 12 packages, which it does not install itself:
#   nfs-ganesha nfs-ganesha-vfs libnfs-utils libnfs-dev rpcbind ethtool tcpdump zstd build-essential
#
# It makes two network namespaces of its own joined by a veth pair (server
# 10.88.0.1, client 10.88.0.2), runs rpcbind and nfs-ganesha in one and
# libnfs clients in the other, and captures on the server's veth. No host
# service, interface or file outside OUTDIR and its scratch directory is
# touched; everything it starts is stopped by PID on exit, also on failure
# or Ctrl-C.
set -euo pipefail

SRV=10.88.0.1
CLI=10.88.0.2
SEED=20261121
WORKERS=4        # parallel nfsload processes per trace
NFILES=16        # files per worker
NOPS3=1500       # paced random operations per worker, NFSv3 ...
NOPS4=2400       # ... and NFSv4 (cheaper on the wire: one COMPOUND per path)
SECS=15          # spread over this many seconds
CLI_PASSES=8     # passes of the libnfs-utils command-line loop
AS_USER=(setpriv --reuid=1000 --regid=1000 --clear-groups)

say() { echo "make-traces: $*" >&2; }
die() { say "error: $*"; exit 1; }

# ---- internal entry points (run by the script itself inside a namespace) ----

# Server side: runs under 'ip netns exec', which gives a private mount
# namespace, so /run can be our own directory there.
serve() {
    local work=$1
    mount -n --bind "$work/run" /run
    mkdir -p /run/rpcbind
    chown _rpc: /run/rpcbind 2>/dev/null || true
    rpcbind -f -h "$SRV" >"$work/log/rpcbind.log" 2>&1 &
    echo $! >"$work/rpcbind.pid"
    for _ in $(seq 50); do [[ -S /run/rpcbind.sock ]] && break; sleep 0.1; done
    ganesha.nfsd -F -f "$work/ganesha.conf" -L "$work/log/ganesha.log" -p "$work/run/ganesha.pid" \
        -N NIV_EVENT >"$work/log/ganesha.out" 2>&1 &
    echo $! >"$work/ganesha.pid"
    wait
}

# Client side: libnfs-utils command-line tools and rpcinfo, each a new
# process and connection; failures are counted, not fatal.
cli_tools() {
    local v=$1 work=$2 url="nfs://$SRV/export" q="?version=$1" t="$2/cli" fails=0 i f
    local to=(timeout 15)
    : >"$t/lsR.txt"
    "${to[@]}" rpcinfo -p "$SRV" >"$t/rpcinfo.txt" 2>&1 || fails=$((fails + 1))
    "${to[@]}" rpcinfo -t "$SRV" nfs "$v" >>"$t/rpcinfo.txt" 2>&1 || fails=$((fails + 1))
    if [[ $v == 3 ]]; then   # the only UDP RPCs: rpcbind GETADDR and NULL
        "${to[@]}" rpcinfo -u "$SRV" nfs 3 >>"$t/rpcinfo.txt" 2>&1 || fails=$((fails + 1))
        "${to[@]}" rpcinfo -u "$SRV" mountd 3 >>"$t/rpcinfo.txt" 2>&1 || fails=$((fails + 1))
    fi
    sleep 3   # let the workers build their trees
    for ((i = 1; i <= CLI_PASSES; i++)); do
        "${to[@]}" nfs-ls "$url$q" >"$t/ls.txt" 2>&1 || fails=$((fails + 1))
        if ((i % 3 == 1)); then
            "${to[@]}" nfs-ls -R "$url/w$((i % WORKERS))$q" >"$t/lsR.txt" 2>&1 || fails=$((fails + 1))
        fi
        # the (i)th small regular file of the last recursive listing
        f=$(awk '$1 ~ /^-/ && $5 <= 262144 && $6 !~ /\/\./ { print $6 }' "$t/lsR.txt" | sort |
            awk -v n="$i" '{ a[NR] = $0 } END { if (NR) print a[(n * 7) % NR + 1] }') || f=
        if [[ -n $f ]]; then
            "${to[@]}" nfs-cat "$url/w$((i % WORKERS))/${f#/}$q" >/dev/null 2>&1 || fails=$((fails + 1))
            "${to[@]}" nfs-cp "$url/w$((i % WORKERS))/${f#/}$q" "$t/copy" >/dev/null 2>&1 || fails=$((fails + 1))
            rm -f "$t/copy"
        fi
        if ((i % 2 == 0)); then   # < 3.9 KB: libnfs 4.0 cannot send a larger NFSv4 WRITE
            { echo "cli upload $i, NFSv$v"; head -c 1500 "$t/ls.txt"; } >"$t/up.txt"
            "${to[@]}" nfs-cp "$t/up.txt" "$url/upload-$i.txt$q" >/dev/null 2>&1 || fails=$((fails + 1))
        fi
        "${to[@]}" nfs-ls -s "$url$q" >/dev/null 2>&1 || fails=$((fails + 1))
        sleep 0.5
    done
    echo "cli v$v passes=$CLI_PASSES failures=$fails"
}

case "${1-}" in
--serve) serve "$2"; exit 0 ;;
--cli) cli_tools "$2" "$3"; exit 0 ;;
""|-h|--help) echo "usage: $0 OUTDIR   (as root)" >&2; exit 2 ;;
esac

# ---- main ----

[[ $EUID == 0 ]] || die "must run as root"
for c in gcc ip ethtool tcpdump zstd rpcbind rpcinfo ganesha.nfsd nfs-ls nfs-cat nfs-cp setpriv timeout; do
    command -v "$c" >/dev/null || die "$c not found (see the package list at the top)"
done
[[ -f /usr/include/nfsc/libnfs.h ]] || die "libnfs-dev is not installed"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
NS_SRV=weir-nfssrv-$$
NS_CLI=weir-nfscli-$$
VSRV=wnfss$$     # <= 15 characters
VCLI=wnfsc$$
WORK=
SERVE_PID=
declare -A BG=()  # client and tcpdump PIDs still to reap
T0=$SECONDS

stop_server() {
    local p pids=()
    [[ -n $WORK ]] || return 0
    for f in "$WORK/ganesha.pid" "$WORK/rpcbind.pid"; do
        p=$(cat "$f" 2>/dev/null) || continue
        [[ -n $p ]] && kill -TERM "$p" 2>/dev/null && pids+=("$p")
        rm -f "$f"
    done
    for _ in $(seq 100); do
        local alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    if [[ -n $SERVE_PID ]]; then
        wait "$SERVE_PID" 2>/dev/null || true
        SERVE_PID=
    fi
}

cleanup() {
    local rc=$? p
    set +e
    trap - EXIT INT TERM
    for p in "${!BG[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${!BG[@]}"; do wait "$p" 2>/dev/null; done
    stop_server
    # Anything left in the namespaces was started by this run.
    for ns in "$NS_CLI" "$NS_SRV"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
    sleep 0.2
    ip netns del "$NS_CLI" 2>/dev/null
    ip netns del "$NS_SRV" 2>/dev/null
    if ((rc != 0)) && [[ -n $WORK ]]; then
        say "failed (status $rc); from the logs:"
        grep -H -v -e ' fail=0 ' -e '^$' "$WORK"/log/v*.log 2>/dev/null | sed 's/^/  /' >&2
        tail -n 3 "$WORK"/log/{serve,rpcbind,ganesha,tcpdump}* 2>/dev/null | sed 's/^/  /' >&2
        rm -f "$OUT/nfsv3.pcap" "$OUT/nfsv4.pcap"
    fi
    [[ -n $WORK ]] && rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. scratch directory, workload program, server configuration
WORK=$(mktemp -d "${TMPDIR:-/tmp}/weir-nfs.XXXXXX")
chmod 755 "$WORK"
mkdir -p "$WORK/log" "$WORK/cli"
chown 1000:1000 "$WORK/cli"
cp "${BASH_SOURCE[0]}" "$WORK/make-traces.sh"   # the clients (uid 1000) run --cli from here
gcc -O2 -Wall -o "$WORK/nfsload" "$HERE/nfsload.c" -lnfs -lm
chmod 755 "$WORK/make-traces.sh" "$WORK/nfsload"

cat >"$WORK/ganesha.conf" <<EOF
NFS_CORE_PARAM {
    Bind_addr = $SRV;
    NFS_Port = 2049;
    MNT_Port = 20048;
    NLM_Port = 32803;
    Protocols = 3, 4;
    Enable_UDP = true;
    mount_path_pseudo = true;   # v3 MOUNT uses the pseudo path /export too
    Enable_NLM = false;
    Enable_RQUOTA = false;
}
NFSV4 {
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = $WORK/recov;
    Minor_Versions = 0, 1, 2;
    Only_Numeric_Owners = true;
    Delegations = false;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
    Export_Id = 1;
    Path = $WORK/export;
    Pseudo = /export;
    Protocols = 3, 4;
    Transports = TCP, UDP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
EOF

# 2. namespaces and the veth pair between them
ip netns add "$NS_SRV"
ip netns add "$NS_CLI"
for ns in "$NS_SRV" "$NS_CLI"; do
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" link set lo up
done
ip link add "$VSRV" netns "$NS_SRV" type veth peer name "$VCLI" netns "$NS_CLI"
ip -n "$NS_SRV" addr add "$SRV/24" dev "$VSRV"
ip -n "$NS_CLI" addr add "$CLI/24" dev "$VCLI"
ip netns exec "$NS_SRV" ethtool -K "$VSRV" tx off rx off tso off gso off gro off >/dev/null
ip netns exec "$NS_CLI" ethtool -K "$VCLI" tx off rx off tso off gso off gro off >/dev/null
ip -n "$NS_SRV" link set "$VSRV" up
ip -n "$NS_CLI" link set "$VCLI" up

start_server() {
    local v=$1
    rm -rf "$WORK/export" "$WORK/run" "$WORK/recov"
    mkdir -p "$WORK/export" "$WORK/run" "$WORK/recov"
    chown 1000:1000 "$WORK/export"
    ip netns exec "$NS_SRV" "$WORK/make-traces.sh" --serve "$WORK" </dev/null >"$WORK/log/serve.log" 2>&1 &
    SERVE_PID=$!
    for _ in $(seq 100); do
        if ip netns exec "$NS_CLI" timeout 2 rpcinfo -t "$SRV" nfs "$v" >/dev/null 2>&1 &&
            { [[ $v == 4 ]] || ip netns exec "$NS_CLI" timeout 2 rpcinfo -t "$SRV" mountd 3 >/dev/null 2>&1; }; then
            return 0
        fi
        kill -0 "$SERVE_PID" 2>/dev/null || die "the server exited"
        sleep 0.2
    done
    die "the server did not come up in 20 s"
}

# 3. one trace per NFS version, each on a fresh server and empty export
for V in 3 4; do
    start_server "$V"
    pcap="$OUT/nfsv$V.pcap"
    tlog="$WORK/log/tcpdump-v$V.log"
    ip netns exec "$NS_SRV" tcpdump -i "$VSRV" -s 0 --time-stamp-precision=nano -B 65536 -Z root \
        -w "$pcap" >"$tlog" 2>&1 &
    TCPDUMP=$!
    BG[$TCPDUMP]=1
    for _ in $(seq 100); do grep -q "listening on" "$tlog" && break; sleep 0.1; done
    grep -q "listening on" "$tlog" || die "tcpdump did not start"
    sleep 0.5
    t=$SECONDS
    clients=()
    nops=$((V == 3 ? NOPS3 : NOPS4))
    for ((w = 0; w < WORKERS; w++)); do
        ip netns exec "$NS_CLI" timeout 60 "${AS_USER[@]}" "$WORK/nfsload" "$SRV" /export "$V" "$w" \
            "$NFILES" "$nops" "$((nops / SECS))" "$SEED" 45 >"$WORK/log/v$V-worker$w.log" 2>&1 &
        clients+=($!)
    done
    ip netns exec "$NS_CLI" timeout 60 "${AS_USER[@]}" "$WORK/make-traces.sh" --cli "$V" "$WORK" \
        >"$WORK/log/v$V-cli.log" 2>&1 &
    clients+=($!)
    for p in "${clients[@]}"; do BG[$p]=1; done
    failed=0
    for p in "${clients[@]}"; do
        wait "$p" || failed=1
        unset "BG[$p]"
    done
    grep -h "^w[0-9]* v\|^cli" "$WORK"/log/v$V-*.log | sed 's/^/  /' >&2 || true
    ((failed == 0)) || die "a v$V client failed"
    sleep 0.5
    kill -INT "$TCPDUMP"
    wait "$TCPDUMP" || true
    unset "BG[$TCPDUMP]"
    grep -q "^0 packets dropped by kernel" "$tlog" || die "tcpdump dropped packets: $(tr '\n' ' ' <"$tlog")"
    say "v$V: $(grep -m1 'packets captured' "$tlog"), workload $((SECONDS - t)) s"
    stop_server
done

# 4. compress (both at once; -19 would take 30 s a file for 5% less) and drop the plain captures
zpids=()
for V in 3 4; do
    zstd -q -f -17 --rm "$OUT/nfsv$V.pcap" -o "$OUT/nfsv$V.pcap.zst" &
    zpids+=($!)
done
for p in "${zpids[@]}"; do wait "$p" || die "zstd failed"; done
ls -l "$OUT"/nfsv3.pcap.zst "$OUT"/nfsv4.pcap.zst >&2
say "done in $((SECONDS - T0)) s"
