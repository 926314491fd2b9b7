#!/usr/bin/env bash
# Installs the built .deb on this machine (root, dpkg -i), checks what it put where (binary,
# application-menu entry, icons, the IT bootstrap location, the autostart entry), runs the
# installed binary headless as a user would (--version; `serve` with the embedded default
# and with a config file, each answering /healthz and /readyz; SIGTERM stops it with exit 0),
# then removes and purges the package and checks the user's data and IT's bootstrap file
# are left alone. Usage: scripts/package_test.sh [path/to/gatehouse.deb]
# (default: the newest .deb that scripts/package.sh built). Not part of scripts/test.sh:
# it needs the release bundle, which CI does not build.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
deb=${1:-$(ls -t "$target_dir"/release/bundle/deb/*.deb 2>/dev/null | head -1 || true)}
[ -f "$deb" ] || { echo "package_test: no .deb (run scripts/package.sh first)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "package_test: run as root (dpkg -i)" >&2; exit 1; }

passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAILED: $*" >&2; failed=$((failed + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }

pkg=$(dpkg-deb -f "$deb" Package)
version=$(dpkg-deb -f "$deb" Version)
echo "package_test: $deb ($pkg $version, $(du -h "$deb" | cut -f1))"
echo "package_test: Depends: $(dpkg-deb -f "$deb" Depends)"
work=$(mktemp -d)
server_pid=
it_file=/etc/gatehouse/bootstrap.json
placed_it_file=false
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  dpkg -s "$pkg" >/dev/null 2>&1 && dpkg -P "$pkg" >/dev/null 2>&1 || true
  if $placed_it_file; then rm -f "$it_file"; rmdir /etc/gatehouse 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if dpkg -s "$pkg" >/dev/null 2>&1; then
  echo "package_test: $pkg is installed already; removing it first"
  dpkg -P "$pkg" >/dev/null
fi
dpkg -i "$deb" >"$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log" >&2; exit 1; }
ok "dpkg -i $pkg"

# What the package installed.
files=$(dpkg -L "$pkg")
check "/usr/bin/gatehouse is installed and executable" test -x /usr/bin/gatehouse
check "/usr/bin/gatehouse-statusline is installed and executable" test -x /usr/bin/gatehouse-statusline
check "gatehouse-statusline without a running tray prints its fallback" \
  sh -c 'echo "{}" | env -i PATH=/usr/bin:/bin HOME=/nonexistent /usr/bin/gatehouse-statusline | grep -qx "Gatehouse: not running"'
desktop=$(echo "$files" | grep '^/usr/share/applications/.*\.desktop$' | head -1 || true)
check "an application-menu entry (${desktop:-none})" test -n "$desktop"
if [ -n "$desktop" ]; then
  check "the menu entry starts the installed binary" grep -qx 'Exec=gatehouse' "$desktop"
  icon=$(sed -n 's/^Icon=//p' "$desktop")
  check "the menu entry's icon ($icon) is installed" \
    bash -c "echo \"\$1\" | grep -q '^/usr/share/icons/hicolor/.*/apps/$icon.png$'" _ "$files"
  if command -v desktop-file-validate >/dev/null; then
    check "desktop-file-validate $desktop" desktop-file-validate "$desktop"
  fi
fi
check "the IT bootstrap location /etc/gatehouse/ with its README" test -f /etc/gatehouse/README
check "the example bootstrap file" test -f /etc/gatehouse/bootstrap.json.example
check "the autostart entry, off by default" grep -qx 'Hidden=true' /etc/xdg/autostart/gatehouse.desktop
check "the package does not own IT's bootstrap.json" bash -c "! echo \"\$1\" | grep -qx $it_file" _ "$files"

# The installed binary, headless, as a user (own HOME, no display).
out=$(env -i PATH=/usr/bin:/bin HOME="$work/home" /usr/bin/gatehouse --version)
check "gatehouse --version ($out)" test "$out" = "gatehouse $version"

# serve: waits for the listening line, checks /healthz and /readyz with the installed
# binary's own healthcheck, then SIGTERM.
serve_and_check() {
  local what=$1; shift
  local log=$work/serve.log
  env -i PATH=/usr/bin:/bin HOME="$work/home" ANTHROPIC_API_KEY=sk-package-test \
    /usr/bin/gatehouse "$@" >"$log" 2>&1 &
  server_pid=$!
  local url=
  for _ in $(seq 1 100); do
    url=$(sed -n 's/^gatehouse: listening on //p' "$log" | head -1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  check "$what: listening (${url:-no line})" test -n "$url"
  if [ -n "$url" ]; then
    check "$what: /healthz" /usr/bin/gatehouse healthcheck "$url/healthz"
    check "$what: /readyz" /usr/bin/gatehouse healthcheck "$url/readyz"
  fi
  kill -TERM "$server_pid"
  local code=0
  wait "$server_pid" || code=$?
  server_pid=
  check "$what: SIGTERM stops it with exit 0 (got $code)" test "$code" = 0
}
serve_and_check "serve (embedded default)" serve --port 0
user_db=$work/home/.local/share/gatehouse/gatehouse.db
check "the user's state is in the user data directory" test -s "$user_db"
mkdir -p "$work/conf"
cat >"$work/conf/gateway.yaml" <<YAML
listen: {host: 127.0.0.1, port: 0}
store: {sqlite_path: "$work/conf/server.db"}
upstreams: [{name: anthropic, provider: anthropic, auth: {api_key: "\${ANTHROPIC_API_KEY}"}}]
YAML
check "check-config on a server config" env -i PATH=/usr/bin:/bin ANTHROPIC_API_KEY=x \
  /usr/bin/gatehouse check-config "$work/conf/gateway.yaml"
serve_and_check "serve --config" serve --config "$work/conf/gateway.yaml"

# The installed tray app in a throwaway desktop session (Xvfb, D-Bus, gnome-keyring, dunst;
# scripts/setup.sh installs them): it starts its gateway, opens the dashboard window and
# keeps its token in the Secret Service. The screenshot is kept beside the bundles.
if command -v Xvfb >/dev/null && command -v dbus-run-session >/dev/null && command -v dunst >/dev/null; then
  tray=$(dbus-run-session -- tests/desktop/tray_session.sh /usr/bin/gatehouse "$work/tray" 2>"$work/tray.err" || true)
  check "the installed tray app starts its gateway ($(sed -n 's/^url=//p' <<<"$tray"))" grep -q '^url=' <<<"$tray"
  check "its dashboard window opens" grep -q '^window=' <<<"$tray"
  colors=$(sed -n 's/^colors=//p' <<<"$tray")
  check "the dashboard is drawn (${colors:-0} colours)" test "${colors:-0}" -gt 200
  check "its local token is in the Secret Service" grep -qx 'keychain=local-token' <<<"$tray"
  [ -f "$work/tray/dashboard.png" ] && cp "$work/tray/dashboard.png" "$(dirname "$deb")/../package_test_dashboard.png"
else
  echo "package_test: no Xvfb/D-Bus session tools; the tray was not started (scripts/setup.sh installs them)"
fi

# Uninstall: IT's file and the user's data stay.
if [ ! -e "$it_file" ]; then
  cp /etc/gatehouse/bootstrap.json.example "$it_file"
  placed_it_file=true
fi
db_sum=$(sha256sum "$user_db" | cut -d' ' -f1)
dpkg -r "$pkg" >/dev/null
check "dpkg -r removes the binary" test ! -e /usr/bin/gatehouse
check "dpkg -r removes the menu entry" test ! -e "$desktop"
check "dpkg -r leaves IT's bootstrap.json" test -f "$it_file"
check "dpkg -r leaves the user's data" test "$(sha256sum "$user_db" | cut -d' ' -f1)" = "$db_sum"
dpkg -P "$pkg" >/dev/null 2>&1 || true
check "dpkg -P (purge) leaves the user's data" test -f "$user_db"
check "dpkg -P leaves IT's bootstrap.json" test -f "$it_file"
check "$pkg is gone" bash -c "! dpkg -s $pkg >/dev/null 2>&1"

# The .rpm beside it (not installed here: this is Debian), by its file list.
rpm_file=$(ls -t "$(dirname "$deb")"/../rpm/*.rpm 2>/dev/null | head -1 || true)
if [ -n "$rpm_file" ] && command -v rpm >/dev/null; then
  rpm_files=$(rpm -qpl "$rpm_file" 2>/dev/null)
  for f in /usr/bin/gatehouse /etc/gatehouse/README /etc/xdg/autostart/gatehouse.desktop; do
    check "the .rpm carries $f" bash -c "echo \"\$1\" | grep -qx $f" _ "$rpm_files"
  done
  check "the .rpm carries the menu entry" bash -c "echo \"\$1\" | grep -q '^/usr/share/applications/.*\\.desktop$'" _ "$rpm_files"
fi

echo "package_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
