#!/usr/bin/env bash
# The Kafka path benchmark: a one-node KRaft broker (release jars from Maven
# Central), weir capture --records --kafka and weir gen in two network
# namespaces this script makes and removes, one weir collect. Per run: the
# frames captured, the records the stream sent / dropped / had delivered,
# bytes per record on the wire, and how fast a collector drains the topic.
# A last run stops the broker (SIGSTOP) for the whole capture: the capture
# must lose no frame; the stream's drops are counted. Markdown on stdout.
# Usage (as root): scripts/bench-kafka.sh [--seconds N] [--reps N]
source "$(dirname "$0")/lib.sh"

seconds=5
reps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    *) die "unknown option $1 (use --seconds N --reps N)" ;;
  esac
done
install_packages
install_rust
install_kafka
build_release
work="$(mktemp -d /tmp/weir-bench-kafka.XXXXXX)"
a="weir-bk-$$-a"; b="weir-bk-$$-b"
broker=""
cleanup() {
  [ -n "$broker" ] && kill -CONT "$broker" 2>/dev/null; [ -n "$broker" ] && kill -KILL "$broker" 2>/dev/null
  ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$a"; ip netns add "$b"
ip -n "$a" link add veth0 type veth peer name veth0 netns "$b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; ip -n "$ns" link set veth0 up; done
ip -n "$a" addr add 10.98.0.1/24 dev veth0; ip -n "$b" addr add 10.98.0.2/24 dev veth0

cat > "$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:19093
listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093
advertised.listeners=PLAINTEXT://127.0.0.1:19092
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$work/kafka
num.partitions=4
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
cp="$WEIR_KAFKA_JARS/*"
ip netns exec "$b" java -cp "$cp" kafka.tools.StorageTool format -t weir-bench-cluster-01 \
  -c "$work/server.properties" --standalone >/dev/null 2>&1 || die "formatting the broker failed"
ip netns exec "$b" java -Xmx1g -cp "$cp" kafka.Kafka "$work/server.properties" >/dev/null 2>&1 &
broker=$!
for _ in $(seq 120); do
  ip netns exec "$b" bash -c 'exec 3<>/dev/tcp/127.0.0.1/19092' 2>/dev/null && break
  sleep 0.5
done
ip netns exec "$b" bash -c 'exec 3<>/dev/tcp/127.0.0.1/19092' 2>/dev/null || die "the broker did not start"

j() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# One run: capture with the stream for $seconds while gen floods 64-byte
# frames; then one collector drains the topic. $1 = run name, $2 = "stall"
# to stop the broker for the whole capture.
run() {
  local name="$1" stall="${2:-}" topic="t-$1" model="${3:-fixed}"
  ip netns exec "$b" "$WEIR" capture -i veth0 -o "$work/$name" --records -j 2 -q \
    --duration "$((seconds + 2))s" --kafka 127.0.0.1:19092 --topic "$topic" 2>"$work/$name.err" &
  local cap=$!
  sleep 1.5
  [ "$stall" = stall ] && kill -STOP "$broker"
  if [ "$model" = imix ]; then
    ip netns exec "$a" "$WEIR" gen -i veth0 --model imix --flows 1000 --duration "${seconds}s" >/dev/null 2>&1
  else
    ip netns exec "$a" "$WEIR" gen -i veth0 --size 64 --flows 1000 --duration "${seconds}s" >/dev/null 2>&1
  fi
  wait "$cap" || true
  [ "$stall" = stall ] && kill -CONT "$broker"
  local m="$work/$name/manifest.json" s e
  s=$(date +%s.%N)
  ip netns exec "$b" "$WEIR" collect --kafka 127.0.0.1:19092 --topic "$topic" --group "g-$name" \
    --idle 3s -q -o "$work/$name-c" >/dev/null 2>&1 || true
  e=$(date +%s.%N)
  local c="$work/$name-c/manifest.json"
  local frames sent dropped failed delivered bytes collected kdrops
  frames=$(j "$m" "m['counts']['frames']")
  kdrops=$(j "$m" "m['drops']['kernel']")
  sent=$(j "$m" "m['kafka']['records']")
  dropped=$(j "$m" "m['kafka']['records_dropped']")
  failed=$(j "$m" "m['kafka']['records_failed']")
  delivered=$(j "$m" "m['kafka']['records_delivered']")
  bytes=$(j "$m" "m['kafka']['bytes']")
  collected=$( [ -f "$c" ] && j "$c" "m['counts']['frames']" || echo 0)
  awk -v n="$name" -v f="$frames" -v k="$kdrops" -v s="$sent" -v d="$dropped" -v x="$failed" \
      -v dl="$delivered" -v b="$bytes" -v c="$collected" -v t0="$s" -v t1="$e" -v sec="$seconds" 'BEGIN {
    t = t1 - t0 - 3; if (t < 0.001) t = 0.001
    printf "| %s | %d | %d | %.2f M | %d | %d | %d | %d | %.1f | %d | %.2f M |\n", n, f, k, f / sec / 1e6, s, d, x, dl,
      (s > 0 ? b / s : 0), c, c / t / 1e6 }'
}
echo "weir capture --records -j 2 --kafka (4 partitions) on a veth pair, weir gen for ${seconds} s (64-byte UDP"
echo "frames over 1000 flows, then IMIX over 1000 TCP flows; 'stalled': 64-byte frames, broker stopped throughout);"
echo "one weir collect drains the topic afterwards (its time less its 3 s idle wait). $(nproc) cores."
echo
echo "| run | frames captured | kernel drops | frames/s | records sent | dropped (queue full) | failed (broker) | delivered | bytes/record | collected | collector records/s |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for r in $(seq "$reps"); do run "64B-$r"; done
run imix "" imix
run stalled stall
