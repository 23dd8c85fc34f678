#!/usr/bin/env bash
# End-to-end benchmarks of `yonder` against the tools people compare it
# with, side by side in one run on this machine, ratios printed:
#
#   job start   yonder run --on <loopback peer> -- true   vs  docker run --rm IMG true
#   upload      1 GiB in 10,000 files: yonder (first and unchanged re-upload)
#               vs rsync -a -e ssh and scp -r to 127.0.0.1
#   forward     yonder forward JOB vs ssh -L, to the same echo server
#               (busybox nc -e cat): bulk throughput and small round trips
#   log latency time from a job printing a line to `yonder logs -f` showing it
#   log reading a finished job's log (`seq 1 200000`: 200,000 records)
#               through the consumer's API as a follower does (wait_ms: the
#               daemon's pushed stream, run.logs.follow) vs as one-off reads
#               do (wait_ms=0: one run.logs round trip per reply)
#
# Needs: the release build (cmake --preset release && cmake --build --preset
# release), a running Docker engine with the test image
# (scripts/services.sh, scripts/build-test-image.sh), openssh-server, rsync
# and python3 (scripts/packages.txt). Starts its own sshd (loopback, a
# throwaway key) and two yonderd in a temporary folder; removes everything
# it started on exit. Not part of the test suite: timing belongs here.
#
#   bench/e2e_bench.sh [--quick] [SECTION...]
#     --quick: 100 MiB in 1,000 files, fewer runs; SECTION: start, upload,
#     forward, logs (default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${YONDER_BIN_DIR:-$root/build/release/apps}
image=yonder-test/busybox:1
quick=0
[ "${1:-}" = "--quick" ] && { quick=1; shift; }
sections=${*:-start upload forward logs}
want() { [[ " $sections " == *" $1 "* ]]; }
files=10000 file_kib=105
runs=10
if [ $quick = 1 ]; then files=1000 file_kib=105 runs=4; fi

for need in "$bin/yonder" "$bin/yonderd" /usr/sbin/sshd rsync scp python3 docker busybox; do
  command -v "$need" >/dev/null || { echo "e2e_bench: $need is missing (see the header of $0)" >&2; exit 2; }
done
docker image inspect "$image" >/dev/null 2>&1 || { echo "e2e_bench: no $image; run scripts/build-test-image.sh" >&2; exit 2; }

tmp=$(mktemp -d /tmp/yb-XXXXXX)
pids=()
studio_id=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  # The provider's job containers and workspace mounts outlive its daemon
  # by design (a restarted daemon adopts them); the bench removes them.
  if [ -n "$studio_id" ]; then
    docker ps -aq --filter "label=yonder.owner=$studio_id" | xargs -r docker rm -f >/dev/null 2>&1 || true
  fi
  awk -v t="$tmp/" 'index($2, t) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

now() { date +%s.%N; }
# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- sshd on loopback with a throwaway key --------------------------------
mkdir -p /run/sshd "$tmp/ssh"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/ssh/host" 
ssh-keygen -q -t ed25519 -N '' -f "$tmp/ssh/client"
cp "$tmp/ssh/client.pub" "$tmp/ssh/authorized_keys"
ssh_port=$(free_port)
cat >"$tmp/ssh/sshd_config" <<EOF
Port $ssh_port
ListenAddress 127.0.0.1
HostKey $tmp/ssh/host
AuthorizedKeysFile $tmp/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
UsePAM no
PidFile $tmp/ssh/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
/usr/sbin/sshd -D -e -f "$tmp/ssh/sshd_config" 2>"$tmp/ssh/log" &
pids+=($!)
ssh_opts=(-i "$tmp/ssh/client" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes)
for _ in $(seq 50); do ssh "${ssh_opts[@]}" -p "$ssh_port" root@127.0.0.1 true 2>/dev/null && break; sleep 0.1; done

# --- two yonder nodes on loopback ------------------------------------------
export YONDER_LINK_LAN_DISCOVERY=false YONDER_LINK_LISTEN=127.0.0.1:0 YONDER_IMAGE_ALLOWLIST='yonder-test/*' YONDER_PULL_POLICY=never
export YONDER_GPU_INVENTORY=fake:1 YONDER_CONFIG=
start_node() {
  local home=$tmp/$1
  YONDER_HOME=$home "$bin/yonder" init --name "$1" >/dev/null
  printf '[jobs]\ndefault_disk_mib = 3072\nmax_concurrent = 8\nmax_per_peer = 8\n' >>"$home/config.toml"
  mkfifo "$tmp/$1.ready"
  YONDER_HOME=$home "$bin/yonderd" --ready-fd 3 3>"$tmp/$1.ready" 2>"$tmp/$1.log" &
  pids+=($!)
  read -r -t 30 _ <"$tmp/$1.ready"
}
start_node studio
start_node laptop
P() { YONDER_HOME=$tmp/studio "$bin/yonder" "$@"; }
C() { YONDER_HOME=$tmp/laptop "$bin/yonder" "$@"; }
studio_id=$(P status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["node_id"])')
link=$(P share --scope run,exec,forward,files --max-jobs 8 --uses 1 --no-qr --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["link"])')
C pair "$link" >/dev/null

echo "Yonder end-to-end benchmarks ($(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)); lower time is better"
echo

# --- job start -------------------------------------------------------------
if want start; then
C run --on studio --image "$image" --no-upload -- true   # warm both paths once
docker run --rm --network none "$image" true
for _ in $(seq $runs); do
  t0=$(now); C run --on studio --image "$image" --no-upload -- true; t1=$(now)
  echo "$t1 - $t0" | bc >>"$tmp/start_yonder"
  t0=$(now); docker run --rm --network none "$image" true; t1=$(now)
  echo "$t1 - $t0" | bc >>"$tmp/start_docker"
done
ys=$(median <"$tmp/start_yonder"); ds=$(median <"$tmp/start_docker")
printf 'job start (median of %d)   yonder run %.3f s   docker run %.3f s   ratio %s (goal <= 1.05)\n' \
  "$runs" "$ys" "$ds" "$(ratio "$ys" "$ds")"

fi

# --- upload ----------------------------------------------------------------
if want upload; then
src=$tmp/src
python3 - "$src" "$files" "$file_kib" <<'EOF'
import os, sys
root, n, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seed = 1
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    seed = (seed * 6364136223846793005 + 1442695040888963407) % 2**64
    with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
        f.write(seed.to_bytes(8, "little") * (kib * 128))
EOF
# A working tree's files were last written a while ago. (Files written in
# the last 2 s are hashed again on every upload, git's "racy" rule: a write
# in the same clock tick could leave size and mtime unchanged.)
find "$src" -type f -exec touch -d '1 hour ago' {} +
total=$(du -sb "$src" | cut -f1)
# Upload time = `run -d` with the folder minus `run -d` without one.
base_t=$( (for _ in 1 2 3; do t0=$(now); C run --on studio --image "$image" --no-upload -d -- true >/dev/null; t1=$(now); echo "$t1 - $t0" | bc; done) | median)
t0=$(now); C run --on studio --image "$image" --disk 3G --upload "$src" -d --json -- true >"$tmp/up1.json"; t1=$(now)
y1=$(echo "$t1 - $t0 - $base_t" | bc)
t0=$(now); C run --on studio --image "$image" --disk 3G --upload "$src" -d --json -- true >"$tmp/up2.json"; t1=$(now)
y2=$(echo "$t1 - $t0 - $base_t" | bc)
sent2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["upload"]["sent_bytes"])' "$tmp/up2.json")
rs="ssh ${ssh_opts[*]} -p $ssh_port"
t0=$(now); rsync -a -e "$rs" "$src/" root@127.0.0.1:"$tmp/rsync_dst/"; t1=$(now)
r1=$(echo "$t1 - $t0" | bc)
t0=$(now); rsync -a --stats -e "$rs" "$src/" root@127.0.0.1:"$tmp/rsync_dst/" >"$tmp/rsync2"; t1=$(now)
r2=$(echo "$t1 - $t0" | bc)
t0=$(now); scp -q -r "${ssh_opts[@]}" -P "$ssh_port" "$src" root@127.0.0.1:"$tmp/scp_dst"; t1=$(now)
s1=$(echo "$t1 - $t0" | bc)
printf 'upload %d files, %s MiB     yonder %.2f s   rsync -e ssh %.2f s   scp -r %.2f s   speed-up vs rsync %sx (goal >= 1.5), vs scp %sx\n' \
  "$files" "$((total >> 20))" "$y1" "$r1" "$s1" "$(ratio "$r1" "$y1")" "$(ratio "$s1" "$y1")"
printf 're-upload unchanged         yonder %.2f s (sent %s bytes)   rsync %.2f s   speed-up vs rsync %sx\n' \
  "$y2" "$sent2" "$r2" "$(ratio "$r2" "$y2")"

fi

# --- forward ---------------------------------------------------------------
if want forward; then
job=$(C run --on studio --image "$image" --no-upload -d -- nc -ll -p 9000 -e cat)
lport=$(free_port)
for _ in $(seq 100); do C forward "$job" "$lport:9000" >/dev/null 2>&1 && break; sleep 0.1; done
# The anchor's echo server is the same program as the job's (busybox nc -e
# cat), on the host: the two paths differ only in how bytes get there.
echo_port=$(free_port)
busybox nc -ll -p "$echo_port" -e cat &
pids+=($!)
sport=$(free_port)
ssh "${ssh_opts[@]}" -p "$ssh_port" -N -L "$sport:127.0.0.1:$echo_port" root@127.0.0.1 &
pids+=($!)
measure() {  # PORT -> "MiB/s p50_ms p99_ms"
  python3 - "$1" "$quick" <<'EOF'
import socket, sys, threading, time
port, quick = int(sys.argv[1]), sys.argv[2] == "1"
# The job's server may still be starting: retry until a round trip works.
for _ in range(100):
    try:
        c = socket.create_connection(("127.0.0.1", port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sendall(b"ping"); got = b""
        while len(got) < 4:
            b = c.recv(4 - len(got))
            if not b: raise OSError("closed")
            got += b
        break
    except OSError:
        time.sleep(0.1)
rtts = []
for _ in range(200 if quick else 1000):
    t = time.perf_counter(); c.sendall(b"x" * 64); got = 0
    while got < 64: got += len(c.recv(64 - got))
    rtts.append(time.perf_counter() - t)
total = (64 if quick else 256) << 20
chunk = b"y" * (1 << 16)
def send():
    for _ in range(total // len(chunk)): c.sendall(chunk)
th = threading.Thread(target=send); t = time.perf_counter(); th.start(); got = 0
while got < total:
    b = c.recv(1 << 20)
    if not b: break
    got += len(b)
el = time.perf_counter() - t; th.join()
rtts.sort()
print("%.1f %.3f %.3f" % (got / el / 2**20, rtts[len(rtts)//2] * 1e3, rtts[int(len(rtts)*0.99)] * 1e3))
EOF
}
read -r yf yp50 yp99 < <(measure "$lport")
read -r sf sp50 sp99 < <(measure "$sport")
printf 'forward echo throughput    yonder %s MiB/s   ssh -L %s MiB/s   ratio %s (goal >= 1.0)\n' "$yf" "$sf" "$(ratio "$yf" "$sf")"
printf 'forward round trip (64 B)  yonder p50 %s ms p99 %s ms   ssh -L p50 %s ms p99 %s ms\n' "$yp50" "$yp99" "$sp50" "$sp99"
C stop "$job" >/dev/null

fi

# --- log line latency ------------------------------------------------------
if want logs; then
# Each log record carries the time Docker took the line from the job
# (record "t", Unix ns); a reader on the consumer's local API long-polls
# /v1/jobs/logs as `yonder logs -f` does and compares with its own clock
# (same machine, same clock): job output -> provider log -> link -> consumer.
lines=$([ $quick = 1 ] && echo 40 || echo 200)
job=$(C run --on studio --image "$image" --no-upload -d -- sh -c \
  "i=0; while [ \$i -lt $lines ]; do echo line \$i; i=\$((i+1)); usleep 50000; done")
python3 - "$tmp/laptop/yonderd.sock" "$job" "$tmp/laptop/api-token" <<'EOF'
import http.client, json, socket, sys, time
class Conn(http.client.HTTPConnection):
    def __init__(self, path): super().__init__("localhost", timeout=60); self.path = path
    def connect(self): self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(self.path)
sock, job = sys.argv[1], sys.argv[2]
auth = {"Authorization": "Bearer " + open(sys.argv[3]).read().strip()}
offset, lat = 0, []
while True:
    c = Conn(sock); c.request("GET", "/v1/jobs/logs?id=%s&offset=%d&wait_ms=15000" % (job, offset), headers=auth)
    r = json.loads(c.getresponse().read()); now = time.time_ns(); c.close()
    for rec in r.get("records", []):
        if rec.get("stream") == "stdout": lat.append((now - rec["t"]) / 1e6)
    offset = r.get("next_offset", offset)
    if r.get("ended"): break
lat = sorted(lat[5:]) or [0]
print("log line latency           p50 %.1f ms   p99 %.1f ms   (%d lines; job output to the consumer's API)" % (lat[len(lat)//2], lat[int(len(lat)*0.99)], len(lat)))
EOF
# Each pair on a fresh job (a follower's stream is kept for a minute after
# it is read, and would answer the second read from memory): the one-off
# reads first, then the follower's, which opens the stream.
pushed=() polled=()
for _ in $(seq "$runs"); do
  job=$(C run --on studio --image "$image" --no-upload -d -- seq 1 200000)
  C wait "$job" >/dev/null
  read -r t_poll t_push size < <(python3 - "$tmp/laptop/yonderd.sock" "$job" "$tmp/laptop/api-token" <<'EOF'
import http.client, json, socket, sys, time
class Conn(http.client.HTTPConnection):
    def __init__(self, path): super().__init__("localhost", timeout=60); self.path = path
    def connect(self): self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(self.path)
sock, job = sys.argv[1], sys.argv[2]
auth = {"Authorization": "Bearer " + open(sys.argv[3]).read().strip()}
def read_all(wait_ms):
    offset, t0 = 0, time.monotonic()
    while True:
        c = Conn(sock); c.request("GET", "/v1/jobs/logs?id=%s&offset=%d&wait_ms=%d" % (job, offset, wait_ms), headers=auth)
        r = json.loads(c.getresponse().read()); c.close()
        offset = r.get("next_offset", offset)
        if r.get("ended") or (wait_ms == 0 and not r.get("records")): break
    return time.monotonic() - t0, offset
t_poll, size = read_all(0)
t_push, _ = read_all(15000)
print(t_poll, t_push, size)
EOF
)
  polled+=("$t_poll") pushed+=("$t_push")
done
mb=$(awk -v b="$size" 'BEGIN {printf "%.2f", b / 1e6}')
mp=$(printf '%s\n' "${polled[@]}" | median) ms=$(printf '%s\n' "${pushed[@]}" | median)
printf 'log reading (%s MB)       pushed stream %s MB/s   run.logs per reply %s MB/s   ratio %s\n' "$mb" \
  "$(awk -v a="$mb" -v t="$ms" 'BEGIN {printf "%.0f", a / t}')" "$(awk -v a="$mb" -v t="$mp" 'BEGIN {printf "%.0f", a / t}')" \
  "$(ratio "$mp" "$ms")"
fi
