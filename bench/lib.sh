# Shared by the live benchmarks (sourced, not run).

# The weir to measure: $WEIR, else the checkout's release build, else the
# one in the shared build cache.
weir_binary() {
  local w=${WEIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/release/weir}
  [ -x "$w" ] || w=${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}/release/weir
  echo "$w"
}

# veth_pair A B: namespaces A and B, joined by a veth pair named veth0 at
# both ends, links up. The caller removes the namespaces.
veth_pair() {
  ip netns add "$1"
  ip netns add "$2"
  ip -n "$1" link add veth0 type veth peer name veth0 netns "$2"
  for ns in "$1" "$2"; do ip -n "$ns" link set lo up; ip -n "$ns" link set veth0 up; done
}

# The median and the largest of numbers given on stdin (spaces or lines).
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2); else print "-"}'; }
worst() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -1; }
