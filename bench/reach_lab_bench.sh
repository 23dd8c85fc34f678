#!/usr/bin/env bash
# Reach in the NAT lab, side by side in one run:
#
#   time to direct   from a consumer's pairing (both nodes online, the link
#                    up through a relay) to the link running on a punched
#                    QUIC path: the punch alone (as yonderd measured it) and
#                    pairing -> `yonder peers` says punched (polled every 20 ms)
#   throughput       `yonder speedtest` over the punched QUIC path (a1 to
#                    b1), over the TLS/TCP carrier through the same NAT (a1
#                    to a provider with a public address on the public
#                    router), over the relay (a2, hole punching off: TLS
#                    inside a relay pipe), and the anchor, raw TCP through
#                    NAT a to the public router (python3), with ratios
#
# Two port-preserving homes, two yonder-relay on the public router's two
# addresses (so STUN can tell the NAT kind), the provider in b1 (listening
# nowhere), consumers in a1 (punching) and a2 (relay only). Loopback-only
# lab: nothing leaves the machine. Needs root, the dev (or release) build
# and python3. Removes everything it started.
#
#   bench/reach_lab_bench.sh [--quick] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${YONDER_BIN_DIR:-$root/build/release/apps}
# The release build when it has all three programs and is not older than dev.
if [ -z "${YONDER_BIN_DIR:-}" ]; then
  for p in yonder yonderd yonder-relay; do
    if [ ! -x "$bin/$p" ] || [ "$root/build/dev/apps/$p" -nt "$bin/$p" ]; then bin=$root/build/dev/apps; fi
  done
fi
bytes=256M raw_mib=256 runs=5
while [ $# -gt 0 ]; do
  case $1 in
    --quick) bytes=32M raw_mib=32 runs=2 ;;
    --runs) runs=$2; shift ;;
    *) echo "usage: $0 [--quick] [--runs N]" >&2; exit 2 ;;
  esac
  shift
done
for need in "$bin/yonder" "$bin/yonderd" "$bin/yonder-relay" python3 nsenter; do
  command -v "$need" >/dev/null || { echo "reach_lab_bench: $need is missing" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "reach_lab_bench: the NAT lab needs root" >&2; exit 2; }

prefix=rlb$$
tmp=$(mktemp -d /tmp/rlb-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  scripts/natlab.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
scripts/natlab.sh up --prefix "$prefix" --nat-a preserving --nat-b preserving >"$tmp/lab.txt"
addr() { sed -n "s/^addr\.$1=//p" "$tmp/lab.txt"; }
inns() { local node=$1; shift; nsenter --net="/run/netns/$prefix-$node" "$@"; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }

relays=""
for n in 1 2; do
  a=$(addr "server$([ $n = 2 ] && echo 2)")
  inns pub "$bin/yonder-relay" --listen "$a:7851" --metrics off --key-file "$tmp/relay$n.key" >"$tmp/relay$n.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^node ' "$tmp/relay$n.log" 2>/dev/null && break; sleep 0.1; done
  id=$(sed -n 's/^node //p' "$tmp/relay$n.log" | head -n1)
  [ -n "$id" ] || { echo "relay $n did not start:" >&2; cat "$tmp/relay$n.log" >&2; exit 1; }
  relays+="${relays:+,}$a:7851@$id"
done

# start NODE NAME PUNCH LISTEN: init and start a yonderd in the lab node.
start() {
  local node=$1 name=$2 home=$tmp/$2
  YONDER_HOME=$home "$bin/yonder" init --name "$name" >/dev/null
  mkfifo "$tmp/$name.ready"
  YONDER_HOME=$home YONDER_LINK_RELAYS=$relays YONDER_LINK_HOLE_PUNCHING=$3 YONDER_LINK_LISTEN=$4 \
    YONDER_LINK_LAN_DISCOVERY=false YONDER_LINK_PORT_MAPPING=false YONDER_API_LISTEN=off \
    inns "$node" "$bin/yonderd" --ready-fd 3 3>"$tmp/$name.ready" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  read -r -t 30 line <"$tmp/$name.ready" || { echo "yonderd $name did not start:" >&2; tail "$tmp/$name.log" >&2; exit 1; }
}
start b1 studio true ""
start a1 laptop true 0.0.0.0:0
start a2 tablet false 0.0.0.0:0
Y() { local who=$1; shift; YONDER_HOME=$tmp/$who "$bin/yonder" "$@"; }
peer_field() { Y "$1" peers --json | python3 -c "import json,sys; p=json.load(sys.stdin)['peers']; print(p[0].get('$2','') if p else '')"; }

link=$(Y studio share --scope run --uses 2 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["link"])')
t0=$(now)
Y laptop pair "$link" >/dev/null
t_paired=$(now)
kind=""
for _ in $(seq 500); do
  kind=$(peer_field laptop path_kind)
  [ "$kind" = punched ] && break
  sleep 0.02
done
t_punched=$(now)
[ "$kind" = punched ] || { echo "no punched path (path: $kind); laptop log:" >&2; tail -n 30 "$tmp/laptop.log" >&2; exit 1; }
punch_ms=$(Y laptop peers --json | python3 -c "import json,sys; print(round(json.load(sys.stdin)['peers'][0]['punch'].get('elapsed_ms', 0)))")
Y tablet pair "$link" >/dev/null
for _ in $(seq 300); do [ "$(peer_field tablet path_kind)" = relay ] && break; sleep 0.05; done

# The TLS/TCP carrier through the same NAT: a provider on the public router
# with a public address, dialled directly by the laptop.
start pub server false "$(addr server):7850"
link2=$(Y server share --scope run --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["link"])')
Y laptop pair "$link2" >/dev/null

speed() {  # speed WHO [PEER] -> MB/s
  Y "$1" speedtest "${2:-studio}" --bytes "$bytes" --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["bytes"] / j["seconds"] / 1e6, 1))'
}
raw() {  # raw TCP a1 -> pub through NAT a, MB/s
  local port=5201
  inns pub python3 -c "
import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('$(addr server)', $port)); s.listen(1)
c,_=s.accept()
while c.recv(1<<20): pass" &
  local rp=$!
  sleep 0.2
  inns a1 python3 -c "
import socket,time; c=socket.create_connection(('$(addr server)', $port)); b=b'x'*(1<<20); t=time.time()
for _ in range($raw_mib): c.sendall(b)
c.shutdown(socket.SHUT_WR); c.recv(1); print(round($raw_mib*1.048576/(time.time()-t), 1))"
  wait $rp 2>/dev/null || true
}

echo "Reach in the NAT lab (2 cores, $(date -u +%FT%RZ), ${bin#$root/}), port-preserving NATs both sides"
printf 'time to direct    punch %s ms (offer to punched, yonderd); pairing -> punched path %.0f ms (incl. QUIC handshake, polling every 20 ms); pairing itself %.0f ms\n' \
  "$punch_ms" "$(awk -v a="$t_punched" -v b="$t_paired" 'BEGIN{print (a-b)*1000}')" \
  "$(awk -v a="$t_paired" -v b="$t0" 'BEGIN{print (a-b)*1000}')"
q=() r=() t=() d=()
for _ in $(seq "$runs"); do
  q+=("$(speed laptop)")
  d+=("$(speed laptop server)")
  r+=("$(speed tablet)")
  t+=("$(raw)")
done
qm=$(printf '%s\n' "${q[@]}" | median) rm_=$(printf '%s\n' "${r[@]}" | median) tm=$(printf '%s\n' "${t[@]}" | median)
dm=$(printf '%s\n' "${d[@]}" | median)
echo "throughput ($bytes, median of $runs; MB/s)"
echo "  punched QUIC $qm   direct TLS/TCP $dm   relay (TLS in a relay pipe) $rm_   raw TCP through the NAT $tm"
echo "  QUIC/TLS-TCP $(ratio "$qm" "$dm")   QUIC/relay $(ratio "$qm" "$rm_")   QUIC/raw TCP $(ratio "$qm" "$tm")   TLS-TCP/raw TCP $(ratio "$dm" "$tm")"
echo "  (loopback carriers without the lab: build/dev/bench/quic_bench)"
