#!/usr/bin/env bash
# The data plane's rows side by side with their anchors, in one run:
#
#   link, 1 stream    / raw TCP          (bench/link_bench)
#   link, 16 streams  / raw TCP          (bench/link_bench)
#   link handshake + first request, ms   (bench/link_bench; TCP round trip as anchor)
#   relay             / direct TLS       (bench/relay_bench)
#   QUIC              / TLS over TCP     (bench/quic_bench; and / raw TCP)
#   QUIC handshake    / TLS handshake    (bench/quic_bench)
#   QUIC              / ngtcp2's example (gtlsclient downloading a file from
#                                         gtlsserver over HTTP/3: the same
#                                         QUIC and crypto libraries; only
#                                         where apt-get install ngtcp2-client
#                                         ngtcp2-server put them)
#
# Each program runs its A B A B pairs and prints every pair; this prints
# their medians as one table at the end. These machines swing 2-3x between
# quiet and loaded minutes, so --loaded runs the same rows again while one
# busy loop per core competes for the CPU (at the same priority), and the
# table shows both. --before DIR runs the same rows with the benches in DIR
# (an older build's bench folder, e.g. a git worktree of the last landing)
# right before each of ours, so a change is compared within one run. Needs
# the release build (cmake --preset release && cmake --build --preset
# release); falls back to dev with a warning.
#
#   bench/data_plane.sh [--quick] [--loaded] [--pairs N] [--before DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/release/bench
if [ ! -x "$dir/link_bench" ] || [ ! -x "$dir/relay_bench" ] || [ ! -x "$dir/quic_bench" ]; then
  dir=build/dev/bench
  echo "data_plane: no release build of the benches; using $dir (debug: read only the ratios)" >&2
fi
for b in link_bench relay_bench quic_bench; do
  [ -x "$dir/$b" ] || { echo "data_plane: $dir/$b is missing: build it with cmake --build --preset release" >&2; exit 2; }
done
link_bytes=1G relay_bytes=512M quic_bytes=256M pairs=5 loaded=0 before=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) link_bytes=128M relay_bytes=64M quic_bytes=64M pairs=2 ;;
    --loaded) loaded=1 ;;
    --pairs) pairs=$2; shift ;;
    --before) before=$2; shift ;;
    *) echo "usage: $0 [--quick] [--loaded] [--pairs N] [--before DIR]" >&2; exit 2 ;;
  esac
  shift
done

if [ -n "$before" ]; then
  for b in link_bench relay_bench quic_bench; do
    [ -x "$before/$b" ] || { echo "data_plane: $before/$b is missing" >&2; exit 2; }
  done
fi

out=$(mktemp -d)
hogs=()
server=""
stop_load() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
  hogs=()
}
cleanup() {
  stop_load
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT

# run_rows TAG DIR: every program in DIR once, its whole output kept in
# $out/TAG.*
run_rows() {
  local tag=$1 bin=$2
  echo "=== $tag: link_bench"
  "$bin/link_bench" --bytes="$link_bytes" --pairs="$pairs" --handshakes=50 | tee "$out/$tag.link"
  echo "=== $tag: relay_bench"
  "$bin/relay_bench" --bytes="$relay_bytes" --pairs="$pairs" | tee "$out/$tag.relay"
  echo "=== $tag: quic_bench"
  "$bin/quic_bench" --bytes="$quic_bytes" --pairs="$pairs" --handshakes=20 | tee "$out/$tag.quic"
}
# ngtcp2_rows TAG: ngtcp2's example client fetching $quic_bytes from its
# example server on loopback, $pairs times; MB/s per line in $out/TAG.ngtcp2
ngtcp2_rows() {
  local tag=$1
  command -v gtlsclient >/dev/null && command -v gtlsserver >/dev/null || return 0
  echo "=== $tag: ngtcp2 example (gtlsserver -> gtlsclient)"
  local ng=$out/ngtcp2 port dl
  mkdir -p "$ng/htdocs"
  # Downloads land in memory where there is a tmpfs: the anchor is QUIC, not the disk.
  dl=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d -p "$ng")
  if [ ! -f "$ng/key.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$ng/key.pem" \
      -out "$ng/cert.pem" -days 1 -subj /CN=localhost 2>/dev/null
    head -c "$(numfmt --from=iec "$quic_bytes")" /dev/zero >"$ng/htdocs/blob"
  fi
  port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  gtlsserver -q --no-quic-dump --no-http-dump -d "$ng/htdocs" 127.0.0.1 "$port" "$ng/key.pem" "$ng/cert.pem" \
    >"$ng/server.log" 2>&1 &
  server=$!
  local size t0 t1
  size=$(stat -c %s "$ng/htdocs/blob")
  for p in $(seq "$pairs"); do
    rm -f "$dl/blob"
    t0=$(date +%s.%N)
    gtlsclient -q --no-quic-dump --no-http-dump --download "$dl" --exit-on-all-streams-close \
      127.0.0.1 "$port" "https://127.0.0.1:$port/blob" >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    if [ "$(stat -c %s "$dl/blob" 2>/dev/null || echo 0)" != "$size" ]; then
      echo "$p ngtcp2 example: download incomplete (see $ng/server.log)"
      continue
    fi
    awk -v p="$p" -v b="$size" -v a="$t0" -v z="$t1" 'BEGIN { printf "%d %.0f MB/s\n", p, b / 1e6 / (z - a) }'
  done | tee "$out/$tag.ngtcp2"
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
  rm -rf "$dl"
}
# both TAG: the --before build's rows (tagged "TAG, before"), then ours
both() {
  if [ -n "$before" ]; then run_rows "$1, before" "$before"; fi
  run_rows "$1" "$dir"
  ngtcp2_rows "$1"
}
tables() {
  if [ -n "$before" ]; then table "$1, before"; fi
  table "$1"
}

# median FILE PATTERN: the median ratio on the line that matches
median() { grep -m1 "$2" "$1" | sed -n 's/.*median ratio \([0-9.]*\).*/\1/p'; }
# mid FORMAT: the median of the numbers on stdin, one per line (the upper
# one of an even count, as the benches take theirs)
mid() { sort -g | awk -v f="$1" '{ v[n++] = $1 } END { if (n) printf f, v[int(n / 2)]; else print "?" }'; }
# column FILE COLUMN: the median of one column over the pair rows (lines
# that start with a pair number) of the first table in FILE
column() { awk -v c="$2" '/median ratio/ { exit } /^[0-9]+ / { print $c }' "$1" | mid %.0f; }
# handshake FILE COLUMN: the same over the handshake table
handshake() { awk -v c="$2" '/^handshake/ { on = 1; next } on && /^[0-9]+ / { print $c }' "$1" | mid %.2f; }

row() { printf '%-34s %12s %12s\n' "$1" "$2" "$3"; }
table() {
  local tag=$1
  local l=$out/$tag.link r=$out/$tag.relay q=$out/$tag.quic
  echo "--- $tag (medians over $pairs pairs; MB/s = 10^6 bytes per second)"
  row "row" "ratio" "figures"
  row "link 1 stream / raw TCP" "$(median "$l" '(1 stream)')" "$(column "$l" 3) vs $(column "$l" 2) MB/s"
  row "link 16 streams / raw TCP" "$(median "$l" '(16 streams)')" "$(column "$l" 4) vs $(column "$l" 2) MB/s"
  row "link handshake+request / TCP rtt" "$(median "$l" 'link handshake /')" "$(handshake "$l" 3) vs $(handshake "$l" 2) ms"
  row "relay / direct" "$(median "$r" 'relay / direct')" "$(column "$r" 3) vs $(column "$r" 2) MB/s"
  row "QUIC / TLS over TCP" "$(median "$q" 'QUIC / TLS-over-TCP throughput')" "$(column "$q" 4) vs $(column "$q" 3) MB/s"
  row "QUIC / raw TCP" "$(median "$q" 'QUIC / raw TCP')" "$(column "$q" 4) vs $(column "$q" 2) MB/s"
  row "QUIC handshake / TLS handshake" "$(median "$q" 'handshake time')" "$(handshake "$q" 3) vs $(handshake "$q" 2) ms"
  local base=${tag%, before} ours ng
  if [ -s "$out/$base.ngtcp2" ]; then
    ours=$(column "$q" 4)
    ng=$(awk '{ print $2 }' "$out/$base.ngtcp2" | mid %.0f)
    row "QUIC / ngtcp2's example" "$(awk -v a="$ours" -v b="$ng" 'BEGIN { printf "%.2f", a / b }')" "$ours vs $ng MB/s"
  fi
}

both quiet
if [ "$loaded" = 1 ]; then
  for _ in $(seq "$(nproc)"); do
    sh -c 'while :; do :; done' &
    hogs+=("$!")
  done
  both loaded
  stop_load
fi
echo
tables quiet
if [ "$loaded" = 1 ]; then tables loaded; fi
