#!/usr/bin/env bash
# scripts/deb-test.sh [BUILD_DIR]: the .deb installs on a clean Debian 12 root
# file system, the service starts and `yonder status` answers.
#
#   1. cpack in BUILD_DIR (default build/dev): packs what is built, compiles nothing
#   2. a minimal bookworm root file system (mmdebstrap --variant=minbase) with
#      systemd and the package's Depends, so `dpkg -i` needs no network; cached
#      as a tarball in $YONDER_DEB_TEST_CACHE (default /var/cache/yonder-test),
#      keyed by the package list and mirror: built once per machine
#   3. docker import, run with systemd as PID 1, dpkg -i, wait for yonderd,
#      `yonder status --json` as root, as a member of the group yonder, and
#      refused to a user outside it; the relay service starts too
#   4. the container and image are removed, whatever happened
# Only Debian packages are used; nothing else is downloaded.
set -euo pipefail

build=$(cd "${1:-build/dev}" && pwd)
cache=${YONDER_DEB_TEST_CACHE:-/var/cache/yonder-test}
say() { printf 'deb-test: %s\n' "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }

for tool in cpack dpkg-deb mmdebstrap docker; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/packages.txt lists what is needed)"
done
[[ -f $build/CPackConfig.cmake ]] || die "$build has no CPackConfig.cmake; configure and build it first"

work=$(mktemp -d /tmp/yonder-deb-test.XXXXXX)
name="yonder-deb-test-$$"
image="yonder-deb-test:$$"
cleanup() {
  if [[ -n ${YONDER_DEB_TEST_KEEP:-} ]]; then say "kept container $name (image $image) for debugging"; return; fi
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- 1. the package
say "packing $build"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; die "cpack failed"; }
deb=$(ls "$work"/pkg/yonder_*.deb)
say "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# --- 2. the root file system: systemd plus the package's Depends (first of
# each alternative, versions dropped)
depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' | grep -v '^$')
# A virtual package (libspdlog1.10-fmt9) is named by the real one that
# provides it, from this machine's apt lists, so the cache key is stable.
real_package() {
  local shown
  shown=$(apt-cache show --no-all-versions "$1" 2>/dev/null || true)
  if grep -q '^Package:' <<<"$shown"; then
    echo "$1"
  else
    apt-cache showpkg "$1" 2>/dev/null | awk '/^Reverse Provides:/ {f = 1; next} f && NF {print $1; exit}'
  fi
}
packages=$(for p in systemd systemd-sysv $depends; do real_package "$p"; done | sort -u | paste -sd, -)
# The Debian mirror this machine's apt uses (one-line or deb822 sources).
mirror=${YONDER_DEBIAN_MIRROR:-$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
  /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -oE '^[[:space:]]*(URIs:|deb)[[:space:]]+http[^[:space:]]*/debian/?([[:space:]]|$)' |
  awk '{print $2}' | head -1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}
key=$(printf 'bookworm minbase %s %s\n' "$packages" "$mirror" | sha256sum | cut -c1-16)
rootfs="$cache/bookworm-$key.tar"
mkdir -p "$cache"
(
  flock 9
  if [[ ! -f $rootfs ]]; then
    say "building the Debian 12 root file system once (cached as $rootfs): $packages"
    # mmdebstrap, not debootstrap: apt fetches in parallel and dpkg unpacks
    # in a few calls, where debootstrap ran one dpkg per package. On a cold
    # machine (CI's) this step was most of the .deb test's 500 s.
    mmdebstrap --quiet --variant=minbase --format=tar --include="$packages" bookworm "$rootfs.tmp" "$mirror" \
      >"$work/mmdebstrap.log" 2>&1 ||
      { tail -30 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed (log above)"; }
    mv "$rootfs.tmp" "$rootfs"
  fi
) 9>"$cache/lock"

# --- 3. boot it, install, ask
docker import "$rootfs" "$image" >/dev/null
# systemd as PID 1 needs to manage its cgroups (v1 here, or v2), a tmpfs
# /run, and CAP_SYS_ADMIN for the units' sandboxing mounts. Not --privileged:
# inside a container without every capability, runc cannot grant them all.
docker run -d --name "$name" --cap-add SYS_ADMIN --security-opt seccomp=unconfined --cgroupns=host \
  -e container=docker \
  --tmpfs /run --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
  "$image" /lib/systemd/systemd >/dev/null
inside() { docker exec "$name" "$@"; }

# Polls a command until it succeeds or the deadline passes (no fixed waits).
await() {
  local what=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
  say "ok: $what"
}
booted() { local s; s=$(inside systemctl is-system-running 2>/dev/null || true); [[ $s == running || $s == degraded ]]; }
await "systemd booted" 60 booted || { inside systemctl --failed --no-pager >&2 || true; die "systemd did not boot"; }

# A stand-in Docker engine on /run/docker.sock (root:docker 0660, as
# docker.io makes it; the group made first, as docker.io would) answering
# every request with a marked error: proves the sandboxed daemon, as the
# user yonder, reaches the socket through its group.
inside groupadd --system docker
docker exec -i "$name" sh -c 'cat > /usr/local/bin/fake-dockerd && chmod 755 /usr/local/bin/fake-dockerd' <<'SH'
#!/bin/sh
while IFS= read -r line; do [ -z "$(printf %s "$line" | tr -d '\r')" ] && break; done
body='{"message":"fake docker of deb-test"}'
printf 'HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' ${#body} "$body"
SH
docker exec -i "$name" sh -c 'cat > /etc/systemd/system/fake-docker.socket' <<'UNIT'
[Socket]
ListenStream=/run/docker.sock
SocketMode=0660
SocketGroup=docker
Accept=yes
UNIT
docker exec -i "$name" sh -c 'cat > /etc/systemd/system/fake-docker@.service' <<'UNIT'
[Service]
ExecStart=/usr/local/bin/fake-dockerd
StandardInput=socket
StandardOutput=socket
UNIT
inside systemctl daemon-reload
inside systemctl start fake-docker.socket

docker cp "$deb" "$name:/tmp/yonder.deb"
inside dpkg -i /tmp/yonder.deb || die "dpkg -i failed"
say "ok: dpkg -i"

journal() { inside journalctl -u "$1" --no-pager -n 40 >&2 || true; }
await "yonderd is active" 60 inside systemctl is-active --quiet yonderd || { journal yonderd; die "yonderd did not start"; }
await "yonder status answers as root" 60 inside yonder status --json || { journal yonderd; die "yonder status does not answer"; }
status=$(inside yonder status --json)
grep -q '"node_id"' <<<"$status" || die "yonder status --json has no node_id: $status"
say "status: $(tr -s ' \n' ' ' <<<"$status")"

reached_docker() { inside journalctl -u yonderd --no-pager | grep -q 'fake docker of deb-test'; }
await "yonderd reaches /run/docker.sock from its sandbox" 30 reached_docker ||
  { journal yonderd; die "yonderd does not reach the Docker socket"; }

# Who can control the daemon: root and the group yonder, nobody else.
inside useradd -m -G yonder ann
inside useradd -m bob
inside runuser -u ann -- yonder status --json | grep -q '"node_id"' || die "a member of the group yonder cannot use yonder"
say "ok: a member of the group yonder controls the daemon"
# (doctor exits non-zero here: the container has no Docker engine or GPU)
doctor=$(inside runuser -u ann -- yonder doctor 2>&1 || true)
grep -q 'private (0600) to the node' <<<"$doctor" ||
  die "yonder doctor, run by a member of the group yonder, does not accept the service's key: $(grep -i key <<<"$doctor")"
say "ok: yonder doctor as a member accepts the service's key"
if inside runuser -u bob -- yonder status --json >/dev/null 2>&1; then die "a user outside the group yonder controls the daemon"; fi
say "ok: a user outside the group is refused"
inside sh -c 'id -nG yonder | grep -qw docker' || die "the user yonder is not in the group docker"
inside stat -c '%a %U %G' /var/lib/yonder /var/lib/yonder/yonderd.sock /var/lib/yonder/api-token /var/lib/yonder/identity.key |
  tr '\n' ';' | grep -q '^710 yonder yonder;660 yonder yonder;640 yonder yonder;600 yonder yonder;$' ||
  die "unexpected modes: $(inside stat -c '%n %a %U %G' /var/lib/yonder /var/lib/yonder/yonderd.sock /var/lib/yonder/api-token /var/lib/yonder/identity.key)"
say "ok: state folder 0710, socket 0660, token 0640, key 0600"
# Root changes a setting of the system node: the file stays the service's,
# and the restarted daemon reads it.
inside yonder config set log.level debug >/dev/null || die "root cannot change a setting of the system node"
inside stat -c '%U' /var/lib/yonder/config.toml | grep -qx yonder ||
  die "root's yonder config set left config.toml owned by $(inside stat -c '%U' /var/lib/yonder/config.toml)"
inside systemctl restart yonderd
await "yonderd restarts with the changed setting" 60 inside yonder status --json ||
  { journal yonderd; die "yonderd does not come back after a setting changed"; }
say "ok: root's config set keeps config.toml the service's, and the daemon reads it"
inside test -s /usr/share/bash-completion/completions/yonder || die "no bash completion installed"
inside test -s /usr/share/man/man1/yonder.1.gz || die "no man page installed"

inside systemctl start yonder-relay
await "yonder-relay is active and has its key" 30 inside test -s /var/lib/yonder-relay/relay.key ||
  { journal yonder-relay; die "yonder-relay did not start"; }
inside systemctl is-active --quiet yonder-relay || { journal yonder-relay; die "yonder-relay stopped"; }

# Removal stops the service.
inside dpkg -r yonder >/dev/null || die "dpkg -r failed"
if inside systemctl is-active --quiet yonderd; then die "yonderd still runs after dpkg -r"; fi
say "ok: dpkg -r stops the service"
say "PASS"
