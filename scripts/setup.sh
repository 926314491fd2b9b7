#!/usr/bin/env bash
# Installs what Gatehouse's build and tests need on a fresh machine of this kind
# (Debian 12 with the Rust toolchain and cargo-nextest). Idempotent; needs root for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium (with its recommended fonts) drives the sign-in pages in Playwright tests.
# python3 drives Claude Code's /login through a pseudo-terminal.
apt_packages=(ca-certificates pkg-config build-essential python3 nodejs npm chromium fonts-liberation)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# This kind of machine ships Node.js and npm outside apt; take them as present.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi

# Real clients for the end-to-end tests, pinned by package-lock.json.
if [ ! -x tests/e2e/node_modules/.bin/claude ] || [ tests/e2e/package-lock.json -nt tests/e2e/node_modules/.package-lock.json ]; then
  echo "setup: installing end-to-end clients (npm ci in tests/e2e)"
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi
