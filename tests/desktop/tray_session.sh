#!/usr/bin/env bash
# Runs the real `gatehouse` tray app in a throwaway desktop session for the tray test:
# a virtual display (Xvfb), a session bus with an unlocked Secret Service (gnome-keyring)
# and a notification daemon (dunst). Started by `src-tauri/tests/tray_window.rs` (and the
# benchmark's `--tray`) inside `dbus-run-session`; prints `key=value` lines, then stops the app.
# The dashboard window is a child process of the tray (`gatehouse tray-window`); closing it
# ends that process and WebKit's, so the tray's process tree is the tray alone.
#
# Usage: tray_session.sh <gatehouse binary> <work dir> [IT bootstrap JSON]
set -euo pipefail
bin=$1
work=$2
bootstrap=${3:-}
mkdir -p "$work/home" "$work/data"
export HOME="$work/home" XDG_DATA_HOME="$work/home/.local/share" XDG_CONFIG_HOME="$work/home/.config"
export GATEHOUSE_BOOTSTRAP_FILE="$work/bootstrap.json"
[ -n "$bootstrap" ] && printf '%s' "$bootstrap" >"$GATEHOUSE_BOOTSTRAP_FILE"
export NO_AT_BRIDGE=1 WEBKIT_DISABLE_COMPOSITING_MODE=1
# A runtime dir of its own: gnome-keyring's control socket lives there, and two sessions
# sharing one would talk to each other's daemon.
export XDG_RUNTIME_DIR="$work/run"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

cleanup() {
  for p in ${app_pid:-} ${dunst_pid:-} ${xvfb_pid:-}; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# A free display number, chosen by Xvfb itself.
exec 3>"$work/display"
Xvfb -displayfd 3 -screen 0 1280x900x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
for _ in $(seq 100); do [ -s "$work/display" ] && break; sleep 0.1; done
export DISPLAY=":$(cat "$work/display")"

# The Secret Service, unlocked with a throwaway password.
eval "$(printf 'throwaway' | gnome-keyring-daemon --unlock --components=secrets)"
dunst >"$work/dunst.log" 2>&1 &
dunst_pid=$!

# The output files exist before the app opens them: the wait below reads them at once.
: >"$work/app.out"
: >"$work/app.err"
"$bin" --data-dir "$work/data" tray --port 0 >"$work/app.out" 2>"$work/app.err" &
app_pid=$!

url=""
for _ in $(seq 600); do
  url=$(sed -n 's/^gatehouse: tray running; gateway on //p' "$work/app.out" | head -1)
  [ -n "$url" ] && break
  kill -0 "$app_pid" 2>/dev/null || { echo "error=app exited"; cat "$work/app.err" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "error=app did not start"; exit 1; }
echo "url=$url"

# The process tree the app started, breadth first (zombies count as no memory).
tree_pids() {
  local pids=$1 next
  while [ -n "$pids" ]; do
    next=""
    for p in $pids; do
      echo "$p"
      next="$next $(ps -o pid= --ppid "$p" | tr '\n' ' ' || true)"
    done
    pids=$(echo $next)
  done
}
rss_of() { local r; r=$(awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || true); echo "${r:-0}"; }
# Memory (KiB of resident pages) of the app and every process it started.
tree_rss() {
  local total=0 p
  for p in $(tree_pids "$1"); do total=$((total + $(rss_of "$p"))); done
  echo "$total"
}
# The same, per process: `name:KiB` (the tray, its window process, WebKit's processes).
tree_procs() {
  local p name out=""
  for p in $(tree_pids "$1"); do
    name=$(cat "/proc/$p/comm" 2>/dev/null || echo gone)
    if [ "$p" = "$1" ]; then name=tray
    elif tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q ' tray-window'; then name=tray-window
    fi
    out="$out $name:$(rss_of "$p")"
  done
  echo $out
}
# The window processes the tray started (direct children running `tray-window`).
window_pids() {
  local p
  for p in $(ps -o pid= --ppid "$1" || true); do
    tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q ' tray-window' && echo "$p"
  done
  true
}

# The dashboard window, then a screenshot once the page has drawn (bounded wait).
win=""
for _ in $(seq 300); do
  # The window titled exactly "Gatehouse" (the tray's helper windows are "gatehouse").
  win=$(xwininfo -root -tree 2>/dev/null | awk '$2 == "\"Gatehouse\":" {print $1; exit}')
  [ -n "$win" ] && break
  sleep 0.1
done
[ -n "$win" ] || { echo "error=no window"; exit 1; }
echo "window=$win"
# The window is the tray's child process; the launch's app token reached it on its stdin,
# never on a command line another user could read.
echo "window_processes=$(window_pids "$app_pid" | wc -l)"
token_seen=no
for p in $(tree_pids "$app_pid"); do
  tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q 'token=' && token_seen=yes
done
echo "token_on_cmdline=$token_seen"
colors=0
for _ in $(seq 60); do
  sleep 0.5
  import -window "$win" "$work/dashboard.png" 2>/dev/null || continue
  colors=$(convert "$work/dashboard.png" -format %k info: 2>/dev/null || echo 0)
  [ "$colors" -gt 200 ] && break
done
echo "shot=$work/dashboard.png"
echo "colors=$colors"
# A second launch, on the first one's port, hands over to it (it shows its window) and
# exits without binding the port or opening the database.
if timeout 20 "$bin" --data-dir "$work/data" tray --port "${url##*:}" >"$work/second.out" 2>"$work/second.err"; then
  echo "second_launch=exited"
fi
echo "windows=$(xwininfo -root -tree 2>/dev/null | awk '$2 == "\"Gatehouse\":"' | wc -l)"
echo "window_processes_after_second_launch=$(window_pids "$app_pid" | wc -l)"
kill -0 "$app_pid" 2>/dev/null && echo "first_alive=yes"
# Memory with the window open, then after its close button: the window process and
# WebKit's processes end, the tray and gateway stay up.
sleep 2
echo "rss_window_open_kib=$(tree_rss "$app_pid")"
echo "rss_window_open_procs=$(tree_procs "$app_pid")"
/usr/bin/python3 "$(dirname "$0")/close_window.py" "$win"
closed_at=$(date +%s%N)
for _ in $(seq 100); do
  xwininfo -root -tree 2>/dev/null | grep -q '"Gatehouse":' || break
  sleep 0.1
done
# The window process ends with its window (bounded wait; the tray kills it after 2 s).
for _ in $(seq 100); do
  [ -z "$(ps -o pid= --ppid "$app_pid" || true)" ] && break
  sleep 0.1
done
echo "window_process_gone_ms=$((($(date +%s%N) - closed_at) / 1000000))"
sleep 3
echo "windows_after_close=$(xwininfo -root -tree 2>/dev/null | awk '$2 == "\"Gatehouse\":"' | wc -l)"
kill -0 "$app_pid" 2>/dev/null && echo "alive_after_close=yes"
echo "rss_window_closed_kib=$(tree_rss "$app_pid")"
echo "rss_window_closed_procs=$(tree_procs "$app_pid")"
# What is left is the tray alone: no child process, no WebKit thread (WebKitGTK's own
# threads, named by WebKit), no GL driver (GDK's GL is off in the tray).
echo "children_after_close=$(ps -o pid= --ppid "$app_pid" | wc -l || true)"
echo "tray_webkit_threads=$(cat /proc/"$app_pid"/task/*/comm 2>/dev/null | grep -c -E 'PressureMonitor|ReceiveQueue|VBlankMonitor|WebsiteDataStore|ebsiteDataStore|JSC|HeapHelper|WebKit' || true)"
echo "tray_gl_driver=$(grep -c -E '_dri\.so|libLLVM|libgallium' /proc/"$app_pid"/maps || true)"
curl -s -o /dev/null -w 'health_after_close=%{http_code}\n' -m 10 "$url/healthz" || true
# A second launch opens a new window on the first.
timeout 20 "$bin" --data-dir "$work/data" tray --port "${url##*:}" >/dev/null 2>&1 || true
for _ in $(seq 100); do
  xwininfo -root -tree 2>/dev/null | grep -q '"Gatehouse":' && break
  sleep 0.1
done
echo "windows_after_reopen=$(xwininfo -root -tree 2>/dev/null | awk '$2 == "\"Gatehouse\":"' | wc -l)"
# A window process that crashes leaves the tray up; the next Open starts a new one.
for p in $(window_pids "$app_pid"); do kill -9 "$p"; done
for _ in $(seq 100); do
  [ -z "$(window_pids "$app_pid")" ] && ! xwininfo -root -tree 2>/dev/null | grep -q '"Gatehouse":' && break
  sleep 0.1
done
kill -0 "$app_pid" 2>/dev/null && echo "alive_after_window_crash=yes"
timeout 20 "$bin" --data-dir "$work/data" tray --port "${url##*:}" >/dev/null 2>&1 || true
for _ in $(seq 100); do
  xwininfo -root -tree 2>/dev/null | grep -q '"Gatehouse":' && break
  sleep 0.1
done
echo "windows_after_crash_reopen=$(xwininfo -root -tree 2>/dev/null | awk '$2 == "\"Gatehouse\":"' | wc -l)"
echo "window_processes_after_crash_reopen=$(window_pids "$app_pid" | wc -l)"
# The local token is in the Secret Service (looked up by its attributes); the app may
# still be writing it on a busy machine, so look for up to 5 s.
for _ in $(seq 20); do
  if secret-tool search --all service gatehouse 2>/dev/null | grep -q 'local-token'; then
    echo "keychain=local-token"
    break
  fi
  sleep 0.25
done
# With PROVOKE_FAILOVER: requests through the tray (its local token from the Secret
# Service) to a provider that refuses connections, until its breaker opens.
if [ -n "${PROVOKE_FAILOVER:-}" ]; then
  token=""
  for _ in $(seq 40); do
    token=$(secret-tool lookup service gatehouse username local-token 2>/dev/null || true)
    [ -n "$token" ] && break
    sleep 0.25
  done
  sent=0
  for _ in $(seq 8); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 20 -H "authorization: Bearer $token" \
      -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \
      -d '{"model":"claude-haiku-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' \
      "$url/v1/messages" || true)
    sent=$((sent + 1))
    echo "failover_status=$code"
  done
  echo "failover_sent=$sent"
fi
# Notifications the daemon received (summaries), waiting briefly for the expected ones.
for _ in $(seq 40); do
  # Shown notifications reach the history once closed.
  dunstctl close-all 2>/dev/null || true
  history=$(dunstctl history 2>/dev/null || true)
  [ -z "${EXPECT_NOTIFICATION:-}" ] && break
  grep -q "$EXPECT_NOTIFICATION" <<<"$history" && break
  sleep 0.25
done
python3 -c 'import json, sys
for n in json.load(sys.stdin)["data"][0]: print("notification=" + n["summary"]["data"])' <<<"${history:-}" 2>/dev/null || true
# The tray ending (here killed, so no Quit runs) closes the window process's stdin, and
# the window process ends with it.
win_pids=$(window_pids "$app_pid")
kill -9 "$app_pid"
wait "$app_pid" 2>/dev/null || true
app_pid=""
left="$win_pids"
for _ in $(seq 100); do
  left=""
  for p in $win_pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
  [ -z "$left" ] && break
  sleep 0.1
done
[ -n "$win_pids" ] && [ -z "$left" ] && echo "window_after_tray_ended=gone"
echo "done"
