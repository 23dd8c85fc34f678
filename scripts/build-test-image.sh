#!/usr/bin/env bash
# Builds the local test image the executor tests run (no registry is
# reachable, so nothing is pulled): a root file system made from Debian's
# busybox-static plus the static `probe` program (scripts/test-image/probe.c),
# imported with `docker import`.
#
# Idempotent: the image is tagged with a hash of this script and probe.c, and
# nothing is done when an image with that hash exists.
# Usage: scripts/build-test-image.sh [image-name]   (default yonder-test/busybox:1)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${1:-yonder-test/busybox:1}
hash=$(cat "$0" "$here/test-image/probe.c" | sha256sum | cut -c1-16)
# Tests running in parallel may all call this: one builds, the others wait.
exec 9>/tmp/yonder-test-image.lock
flock 9

if [ "$(docker image inspect -f '{{index .Config.Labels "yonder.test-image"}}' "$image" 2>/dev/null || true)" = "$hash" ]; then
  echo "build-test-image: $image is current ($hash)"
  exit 0
fi
busybox=/bin/busybox  # from busybox-static (a dynamic busybox would not run in the image)
if ! [ -x "$busybox" ] || ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
  echo "build-test-image: busybox-static is not installed; run scripts/setup.sh" >&2
  exit 1
fi

work=$(mktemp -d /tmp/yonder-test-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,etc,tmp,workspace,dev,proc,sys,dev/shm}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
gcc -static -O2 -o "$root/bin/probe" "$here/test-image/probe.c"
# A set-user-id root copy: the setuid abuse test runs it and must stay 65534.
cp "$root/bin/probe" "$root/bin/probe-suid"
chmod 4755 "$root/bin/probe-suid"
chmod 1777 "$root/tmp"
cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
PW
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$work/root.tar" .
old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker import --change "LABEL yonder.test-image=$hash" --change 'CMD ["/bin/sh"]' \
  "$work/root.tar" "$image" >/dev/null
# The previous build, now untagged; left alone if a container still uses it.
[ -n "$old" ] && docker image rm "$old" >/dev/null 2>&1 || true
echo "build-test-image: built $image ($hash)"
