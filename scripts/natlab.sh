#!/usr/bin/env bash
# The NAT lab: two home networks behind NATs and a public router, built from
# Linux network namespaces, veth pairs and iptables, for testing how peers
# reach each other (relay, LAN discovery, later hole punching).
#
#                       P-pub  (public router; the relay runs here)
#                 lo: 198.18.0.1/32, 198.18.0.2/32   (the "servers")
#        to-a 203.0.113.1/24          to-b 198.51.100.1/24
#                 |                            |
#        wan0 203.0.113.2/24          wan0 198.51.100.2/24
#             P-nat-a                      P-nat-b        MASQUERADE on wan0,
#        br0 192.168.1.1/24           br0 192.168.1.1/24  inbound only if
#           |           |                    |            ESTABLISHED/RELATED
#   eth0 .1.10    eth0 .1.11           eth0 .1.20
#       P-a1          P-a2                 P-b1
#
# Both homes use the same private subnet, as real homes do. NAT modes per home:
#   preserving  MASQUERADE               (keeps the host's source port when free)
#   symmetric   MASQUERADE --random-fully (a random port per new flow, i.e. per
#                                          destination: defeats hole punching)
# Every address, route and rule lives inside the lab's namespaces (all named
# P-<node>, P the prefix): the host's interfaces, routes and iptables are not
# touched and nothing leaves the machine. ip_forward is set inside the lab
# only (on in pub and the NATs, off in the hosts: new namespaces inherit the
# host's IPv4 settings). IPv6 is off in the lab.
#
# Usage (root):
#   natlab.sh up [--prefix P] [--nat-a preserving|symmetric] [--nat-b ...] [--owner PID]
#       Builds the lab (removing a stale lab with the same prefix first) and
#       prints its addresses as key=value lines. With --owner, `reap` removes
#       the lab once that process is gone (tests pass their own pid).
#   natlab.sh down [--prefix P]          removes it; idempotent. Processes still
#                                        running in the lab's namespaces are
#                                        stopped (TERM, then KILL after 5 s).
#   natlab.sh exec [--prefix P] NODE [--] CMD...   runs CMD in NODE's namespace
#                                        (pub, nat-a, nat-b, a1, a2, b1)
#   natlab.sh move [--prefix P] HOST HOME  plugs HOST (a1, a2, b1) into HOME's LAN
#                                        (nat-a or nat-b), as a laptop that
#                                        changes networks: same private address,
#                                        another router, another public address
#   natlab.sh status [--prefix P]        the lab's addresses, interfaces and NAT
#                                        rules, and every lab that is up
#   natlab.sh reap                       removes labs whose --owner has exited
# The default prefix is "natlab". Capture with tcpdump inside the lab, e.g.
#   natlab.sh exec pub -- tcpdump -ni to-a -w /tmp/relay-a.pcap
set -Eeuo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # ip, iptables, sysctl (root without a login shell)

readonly NODES=(pub nat-a nat-b a1 a2 b1)
readonly STATE_DIR=/run/yonder-natlab

# Addresses: documentation ranges (RFC 5737) for the public links, the
# benchmarking range (RFC 2544) for the servers, one private /24 per home.
# 192.0.2.0/24 is left alone: some hosts (CI machines) use it for their real
# network, and captures should never be ambiguous.
readonly SERVER_ADDR=198.18.0.1 SERVER2_ADDR=198.18.0.2
readonly PUB_A_ADDR=203.0.113.1 NAT_A_WAN=203.0.113.2
readonly PUB_B_ADDR=198.51.100.1 NAT_B_WAN=198.51.100.2
readonly LAN_GW=192.168.1.1 A1_ADDR=192.168.1.10 A2_ADDR=192.168.1.11 B1_ADDR=192.168.1.20

die() { echo "natlab: $*" >&2; exit 1; }

usage() {
  sed -n '/^# Usage/,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

prefix=natlab
nat_a=preserving
nat_b=preserving
owner=""

ns() { echo "$prefix-$1"; }

valid_node() {
  local n
  for n in "${NODES[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

check_prefix() {
  [[ $prefix =~ ^[a-z0-9][a-z0-9-]{0,39}$ ]] ||
    die "bad --prefix '$prefix': use 1-40 characters of a-z, 0-9 and '-', starting with a letter or digit"
}

check_mode() {
  case $2 in
    preserving | symmetric) ;;
    *) die "bad $1 '$2': use preserving or symmetric" ;;
  esac
}

require_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces and iptables): run it with sudo"
  command -v ip >/dev/null || die "'ip' not found: install iproute2 (scripts/setup.sh)"
}

ns_exists() { [ -e "/run/netns/$1" ]; }

# Start time of a pid (field 22 of /proc/PID/stat), so a reused pid does not
# pass for the owner.
start_time() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null || true; }

# TERM, then KILL, every process whose network namespace is `ns` (never this
# script or its caller).
stop_processes_in() {
  local ns=$1 pids p alive i state
  pids=$(ip netns pids "$ns" 2>/dev/null | grep -vx -e "$$" -e "$PPID" || true)
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for i in $(seq 50); do
    alive=""
    for p in $pids; do
      state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$p/stat" 2>/dev/null || true)
      [ -n "$state" ] && [ "$state" != Z ] && alive+=" $p"
    done
    [ -n "$alive" ] || return 0
    sleep 0.1
  done
  echo "natlab: killing what ignored SIGTERM in $ns:$alive" >&2
  # shellcheck disable=SC2086
  kill -KILL $alive 2>/dev/null || true
}

cmd_down() {
  local n i
  for ((i = ${#NODES[@]} - 1; i >= 0; i--)); do
    n=$(ns "${NODES[$i]}")
    ns_exists "$n" || continue
    stop_processes_in "$n"
    ip netns del "$n" 2>/dev/null || true
  done
  rm -f "$STATE_DIR/$prefix"
  for n in "${NODES[@]}"; do
    ! ns_exists "$(ns "$n")" || die "could not remove namespace $(ns "$n"); see 'ip netns pids $(ns "$n")'"
  done
}

in_ns() { ip netns exec "$(ns "$1")" "${@:2}"; }

sysctl_in() { in_ns "$1" sysctl -qw "$2" >/dev/null; }

# A namespace with loopback up, IPv6 off and forwarding as given.
make_node() {
  local node=$1 forward=$2
  ip netns add "$(ns "$node")"
  ip -n "$(ns "$node")" link set lo up
  sysctl_in "$node" net.ipv6.conf.all.disable_ipv6=1
  sysctl_in "$node" net.ipv6.conf.default.disable_ipv6=1
  sysctl_in "$node" "net.ipv4.ip_forward=$forward"
}

# One home: a NAT namespace with wan0 towards pub and a bridge br0 for its LAN.
make_home() {
  local nat=$1 pub_if=$2 pub_addr=$3 wan_addr=$4 mode=$5
  local n
  n=$(ns "$nat")
  ip -n "$(ns pub)" link add "$pub_if" type veth peer name wan0 netns "$n"
  ip -n "$(ns pub)" addr add "$pub_addr/24" dev "$pub_if"
  ip -n "$(ns pub)" link set "$pub_if" up
  ip -n "$n" addr add "$wan_addr/24" dev wan0
  ip -n "$n" link set wan0 up
  ip -n "$n" route add default via "$pub_addr"
  # No snooping: with no IGMP querier on the LAN it could stop multicast
  # (LAN discovery) between the hosts.
  ip -n "$n" link add br0 type bridge mcast_snooping 0
  ip -n "$n" addr add "$LAN_GW/24" dev br0
  ip -n "$n" link set br0 up
  # If br_netfilter is loaded (dockerd loads it), bridged frames pass this
  # namespace's iptables; keep the LAN a plain switch.
  if in_ns "$nat" test -e /proc/sys/net/bridge/bridge-nf-call-iptables; then
    sysctl_in "$nat" net.bridge.bridge-nf-call-iptables=0
  fi
  local masq=(-j MASQUERADE)
  [ "$mode" = symmetric ] && masq+=(--random-fully)
  in_ns "$nat" iptables -t nat -A POSTROUTING -o wan0 "${masq[@]}"
  # A home router: the LAN may go out; from outside only replies come in.
  in_ns "$nat" iptables -A FORWARD -i br0 -o br0 -j ACCEPT
  in_ns "$nat" iptables -A FORWARD -i br0 -o wan0 -j ACCEPT
  in_ns "$nat" iptables -A FORWARD -i wan0 -o br0 -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  in_ns "$nat" iptables -P FORWARD DROP
}

make_host() {
  local host=$1 nat=$2 addr=$3
  make_node "$host" 0
  ip -n "$(ns "$nat")" link add "lan-$host" type veth peer name eth0 netns "$(ns "$host")"
  ip -n "$(ns "$nat")" link set "lan-$host" master br0 up
  ip -n "$(ns "$host")" addr add "$addr/24" dev eth0
  ip -n "$(ns "$host")" link set eth0 up
  ip -n "$(ns "$host")" route add default via "$LAN_GW"
}

summary() {
  local n
  echo "prefix=$prefix"
  echo "nat_a=$nat_a"
  echo "nat_b=$nat_b"
  for n in "${NODES[@]}"; do echo "netns.$n=$(ns "$n")"; done
  echo "addr.server=$SERVER_ADDR"
  echo "addr.server2=$SERVER2_ADDR"
  echo "addr.pub.a=$PUB_A_ADDR"
  echo "addr.pub.b=$PUB_B_ADDR"
  echo "addr.nat-a=$NAT_A_WAN"
  echo "addr.nat-b=$NAT_B_WAN"
  echo "addr.nat-a.lan=$LAN_GW"
  echo "addr.nat-b.lan=$LAN_GW"
  echo "addr.a1=$A1_ADDR"
  echo "addr.a2=$A2_ADDR"
  echo "addr.b1=$B1_ADDR"
}

cmd_up() {
  command -v iptables >/dev/null || die "'iptables' not found: install iptables (scripts/setup.sh)"
  cmd_down
  trap 'echo "natlab: up failed; removing the half-built lab" >&2; trap - ERR; cmd_down' ERR
  make_node pub 1
  ip -n "$(ns pub)" addr add "$SERVER_ADDR/32" dev lo
  ip -n "$(ns pub)" addr add "$SERVER2_ADDR/32" dev lo
  make_node nat-a 1
  make_node nat-b 1
  make_home nat-a to-a "$PUB_A_ADDR" "$NAT_A_WAN" "$nat_a"
  make_home nat-b to-b "$PUB_B_ADDR" "$NAT_B_WAN" "$nat_b"
  make_host a1 nat-a "$A1_ADDR"
  make_host a2 nat-a "$A2_ADDR"
  make_host b1 nat-b "$B1_ADDR"
  mkdir -p "$STATE_DIR"
  {
    echo "nat_a=$nat_a"
    echo "nat_b=$nat_b"
    if [ -n "$owner" ]; then
      echo "owner=$owner"
      echo "owner_start=$(start_time "$owner")"
    fi
  } >"$STATE_DIR/$prefix"
  trap - ERR
  summary
}

load_state() {
  [ -f "$STATE_DIR/$prefix" ] || return 1
  nat_a=$(sed -n 's/^nat_a=//p' "$STATE_DIR/$prefix")
  nat_b=$(sed -n 's/^nat_b=//p' "$STATE_DIR/$prefix")
}

cmd_status() {
  local n p
  if ns_exists "$(ns pub)"; then
    load_state || true
    summary
    for n in "${NODES[@]}"; do
      echo "# $n ($(ns "$n"))"
      ip -n "$(ns "$n")" -br addr | sed 's/^/#   /'
    done
    for n in nat-a nat-b; do
      echo "# $n NAT: $(in_ns "$n" iptables -t nat -S POSTROUTING | grep -- '-o wan0' || echo none)"
    done
  else
    echo "# no lab with prefix '$prefix' is up"
  fi
  echo "# labs up:"
  for p in "$STATE_DIR"/*; do
    [ -f "$p" ] && echo "#   $(basename "$p") ($(tr '\n' ' ' <"$p"))"
  done
  return 0
}

# The host's cable goes from its router's bridge to HOME's: its address and
# gateway (192.168.1.1 in both homes) stay; its flows through the old NAT
# are gone, so its peers see it from HOME's public address from now on.
cmd_move() {
  local host=$1 home=$2 from=""
  case $host in a1 | a2 | b1) ;; *) die "move: unknown host '$host': a1, a2 or b1" ;; esac
  case $home in nat-a | nat-b) ;; *) die "move: unknown home '$home': nat-a or nat-b" ;; esac
  ns_exists "$(ns "$host")" || die "no lab with prefix '$prefix' is up: run natlab.sh up --prefix $prefix"
  local n
  for n in nat-a nat-b; do
    if ip -n "$(ns "$n")" link show "lan-$host" >/dev/null 2>&1; then from=$n; fi
  done
  [ -n "$from" ] || die "move: $host is plugged into no home"
  [ "$from" != "$home" ] || return 0
  ip -n "$(ns "$from")" link set "lan-$host" netns "$(ns "$home")"
  ip -n "$(ns "$home")" link set "lan-$host" master br0 up
  ip -n "$(ns "$host")" neigh flush all
}

cmd_reap() {
  local f o st
  for f in "$STATE_DIR"/*; do
    [ -f "$f" ] || continue
    o=$(sed -n 's/^owner=//p' "$f")
    st=$(sed -n 's/^owner_start=//p' "$f")
    [ -n "$o" ] || continue
    if [ ! -d "/proc/$o" ] || [ "$(start_time "$o")" != "$st" ]; then
      prefix=$(basename "$f")
      echo "natlab: removing lab '$prefix' (its owner, pid $o, has exited)" >&2
      cmd_down
    fi
  done
}

[ $# -ge 1 ] || usage
cmd=$1
shift
node=""
move_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    --nat-a) check_mode --nat-a "${2:-}"; nat_a=$2; shift 2 ;;
    --nat-b) check_mode --nat-b "${2:-}"; nat_b=$2; shift 2 ;;
    --owner) owner=${2:?--owner needs a pid}; shift 2 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    *)
      if [ "$cmd" = move ]; then
        move_args+=("$1")
        shift
      elif [ "$cmd" = exec ] && [ -z "$node" ]; then
        node=$1
        shift
      elif [ "$cmd" = exec ]; then
        break
      else
        die "unknown argument '$1' (see natlab.sh --help)"
      fi
      ;;
  esac
done
check_prefix
[ -z "$owner" ] || [[ $owner =~ ^[0-9]+$ ]] || die "bad --owner '$owner': a pid"

case $cmd in
  up) require_root; cmd_up ;;
  down) require_root; cmd_down ;;
  status) require_root; cmd_status ;;
  reap) require_root; cmd_reap ;;
  move)
    require_root
    [ ${#move_args[@]} -eq 2 ] || die "move needs a host and a home, e.g. move a1 nat-b"
    cmd_move "${move_args[@]}"
    ;;
  exec)
    require_root
    [ -n "$node" ] || die "exec needs a node: one of ${NODES[*]}"
    valid_node "$node" || die "unknown node '$node': one of ${NODES[*]}"
    [ $# -gt 0 ] || die "exec needs a command after the node"
    ns_exists "$(ns "$node")" || die "no lab with prefix '$prefix' is up: run natlab.sh up --prefix $prefix"
    exec ip netns exec "$(ns "$node")" "$@"
    ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$cmd': up, down, exec, move, status or reap" ;;
esac
