#!/usr/bin/env bash
# Installs the Debian 12 packages listed in scripts/packages.txt, then the
# dashboard's npm packages (web/dashboard/package-lock.json: uPlot, which the
# build embeds into yonderd; nothing is fetched at build or run time).
# Idempotent: installs only what is missing, and does nothing when all is there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

npm_packages() {
  local dash="$here/../web/dashboard" stamp
  stamp="$dash/node_modules/.yonder-installed-lock.json"
  if cmp -s "$dash/package-lock.json" "$stamp"; then
    echo "setup: dashboard npm packages present"
    return 0
  fi
  # Debian's npm, unless an npm is there already (a Node.js from elsewhere,
  # such as NodeSource's, carries its own and conflicts with Debian's).
  if ! command -v npm >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "setup: npm is missing; run as root (or: sudo $0) to install Debian's npm" >&2
      exit 1
    fi
    echo "setup: installing npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
  fi
  echo "setup: installing the dashboard's npm packages (npm ci in web/dashboard)"
  (cd "$dash" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  cp "$dash/package-lock.json" "$stamp"
}
mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$here/packages.txt")
missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#wanted[@]} packages present"
  npm_packages
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root (or: sudo $0) to install them" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
npm_packages
