#!/usr/bin/env bash
# Installs what Gatehouse's build and tests need on a fresh machine of this kind
# (Debian 12 with the Rust toolchain and cargo-nextest). Idempotent; needs root for apt.
# `setup.sh --build` installs only what building and running needs (scripts/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=false
[ "${1:-}" = "--build" ] && build_only=true

apt_packages=(ca-certificates pkg-config build-essential nodejs npm)
# The desktop tray (Tauri v2 on WebKitGTK 4.1, tray icon, D-Bus for keychain and notifications).
apt_packages+=(libwebkit2gtk-4.1-dev libgtk-3-dev libayatana-appindicator3-dev librsvg2-dev
  libsoup-3.0-dev libjavascriptcoregtk-4.1-dev libdbus-1-dev xdg-utils file)
if ! $build_only; then
  # chromium (with its recommended fonts) drives the sign-in pages in Playwright tests.
  # python3 drives Claude Code's /login through a pseudo-terminal.
  apt_packages+=(python3 chromium fonts-liberation)
  # openssl makes the RSA service-account key of the Vertex test.
  apt_packages+=(openssl)
  # Desktop tests: a virtual display, screenshots, a Secret Service and a notification daemon.
  # curl sends requests through the tray in its session test.
  apt_packages+=(xvfb xauth imagemagick x11-utils dbus-x11 dunst libnotify-bin fonts-dejavu-core curl)
  # python3-xlib closes the tray's window as a window manager would (tests/desktop/close_window.py).
  apt_packages+=(python3-xlib)
  # Keychain tests: a Secret Service (gnome-keyring) in `dbus-run-session`, checked with secret-tool.
  apt_packages+=(gnome-keyring libsecret-tools)
  # Deployment checks: systemd-analyze for the unit, a Python venv for the pinned validators.
  # bubblewrap runs the server on a read-only root as the container image would.
  apt_packages+=(systemd python3-venv bubblewrap)
fi

missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# This kind of machine ships Node.js and npm outside apt; take them as present.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
# A real PostgreSQL server for the store tests (scripts/postgres.sh starts a throwaway
# cluster): Debian's `postgresql` unless server binaries are already installed.
if ! $build_only && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi

# The dashboard (ui/): the engine embeds ui/dist at compile time, so build it first, and
# again whenever its sources or lock file are newer than the build.
if [ ! -x ui/node_modules/.bin/vite ] || [ ui/package-lock.json -nt ui/node_modules/.package-lock.json ]; then
  echo "setup: installing the dashboard's build tools (npm ci in ui)"
  (cd ui && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -f ui/dist/index.html ] || [ -n "$(find ui/src ui/public ui/index.html ui/package-lock.json \
    ui/vite.config.ts ui/tsconfig.json -newer ui/dist/index.html -print -quit)" ]; then
  echo "setup: building the dashboard (npm run build in ui)"
  (cd ui && npm run build --silent)
fi

$build_only && exit 0

# The book (docs/, an mdBook): tests/tests/docs builds it with warnings as errors and
# scripts/docs.sh serves it. The mdbook CLI is pinned; a cold install compiles for about
# five minutes on two cores.
mdbook_version=0.5.4
if [ "$("${CARGO_HOME:-$HOME/.cargo}/bin/mdbook" --version 2>/dev/null)" != "mdbook v$mdbook_version" ]; then
  echo "setup: installing mdbook $mdbook_version (cargo install)"
  cargo install mdbook --locked --version "$mdbook_version"
fi

# Deployment checks (src-tauri/tests/deploy.rs): the Kubernetes schema validator (it carries
# the schemas of each Kubernetes release, so it validates offline) and hadolint, pinned.
if [ ! -x .tools/venv/bin/kubernetes-validate ] || [ deploy/requirements.txt -nt .tools/venv/pyvenv.cfg ]; then
  echo "setup: installing the deployment validators (pip in .tools/venv)"
  python3 -m venv .tools/venv
  .tools/venv/bin/pip install -q --disable-pip-version-check -r deploy/requirements.txt
  touch .tools/venv/pyvenv.cfg
fi

# Real clients for the end-to-end tests, pinned by package-lock.json.
if [ ! -x tests/e2e/node_modules/.bin/claude ] || [ tests/e2e/package-lock.json -nt tests/e2e/node_modules/.package-lock.json ]; then
  echo "setup: installing end-to-end clients (npm ci in tests/e2e)"
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi
