#!/usr/bin/env bash
# Builds the image the GPU known-answer check's end-to-end test runs
# (tests/integration/mesh_verify_test.cpp): busybox's sh, this machine's
# Python (Debian's python3) and the TEST DOUBLE of PyTorch's CUDA surface
# (tests/mesh/core/torch_double: CPU arithmetic, no GPU), whose device is named
# "FAKE TWIN" as the test's fake GPU inventory ("fake:1:TWIN:24") advertises
# it. It stands in for a PyTorch+CUDA image on machines without a GPU; the
# real check runs on a GPU machine (scripts/gpu-check.sh).
#
# Idempotent like scripts/build-test-image.sh: tagged with a hash of this
# script, the double and the Python version; nothing is done when current.
# Usage: scripts/build-torch-double-image.sh [image-name]   (default yonder-test/torch-double:1)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${1:-yonder-test/torch-double:1}
python=$(readlink -f /usr/bin/python3 || true)  # Debian's python3 (not a pyenv shim)
if ! [ -x "$python" ]; then
  echo "build-torch-double-image: python3 is not installed; run scripts/setup.sh" >&2
  exit 1
fi
stdlib=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
hash=$(cat "$0" "$here/../tests/mesh/core/torch_double/torch/__init__.py" <("$python" --version) | sha256sum | cut -c1-16)
exec 9>/tmp/yonder-torch-double-image.lock
flock 9

if [ "$(docker image inspect -f '{{index .Config.Labels "yonder.test-image"}}' "$image" 2>/dev/null || true)" = "$hash" ]; then
  echo "build-torch-double-image: $image is current ($hash)"
  exit 0
fi
busybox=/bin/busybox  # busybox-static, as in scripts/build-test-image.sh
[ -x "$busybox" ] || { echo "build-torch-double-image: busybox-static is not installed; run scripts/setup.sh" >&2; exit 1; }

work=$(mktemp -d /tmp/yonder-torch-double.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,etc,tmp,workspace,dev,proc,sys,usr/bin,opt/torch-double}
cp "$busybox" "$root/bin/busybox"
for applet in sh env cat ls; do ln -s busybox "$root/bin/$applet"; done
# The interpreter, the shared libraries it loads, and its standard library
# (without the parts a headless program never imports).
cp "$python" "$root/usr/bin/"
ln -s "$(basename "$python")" "$root/usr/bin/python3"
for lib in $(ldd "$python" | grep -oE '/[^ ]+\.so[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
mkdir -p "$root$stdlib"
tar -C "$stdlib" --exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./ensurepip \
  --exclude=./lib2to3 --exclude=./site-packages --exclude=./dist-packages -cf - . | tar -C "$root$stdlib" -xf -
cp -r "$here/../tests/mesh/core/torch_double/torch" "$root/opt/torch-double/"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$work/root.tar" .
old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker import --change "LABEL yonder.test-image=$hash" --change 'CMD ["/bin/sh"]' \
  --change 'ENV PATH=/usr/bin:/bin PYTHONPATH=/opt/torch-double PYTHONDONTWRITEBYTECODE=1' \
  --change 'ENV YONDER_TORCH_DOUBLE_DEVICE="FAKE TWIN"' \
  "$work/root.tar" "$image" >/dev/null
[ -n "$old" ] && docker image rm "$old" >/dev/null 2>&1 || true
echo "build-torch-double-image: built $image ($hash)"
