#!/usr/bin/env bash
# A throwaway desktop session for the status line test (tests/tests/integration/
# claude_statusline.rs): started inside `dbus-run-session` with HOME, XDG_DATA_HOME,
# XDG_CONFIG_HOME and XDG_RUNTIME_DIR under <work dir>, it unlocks a gnome-keyring Secret
# Service whose keyring file lives under that HOME (so a later session with the same HOME
# sees the same items), and then:
#
#   claude      stores the local token ($LOCAL_TOKEN) as the tray stores it (service
#               `gatehouse`, username `local-token`), checks that `gatehouse token --local`
#               (Claude Code's apiKeyHelper) reads it back, and runs the real Claude Code
#               interactively through tests/e2e/claude_statusline.py in $PROJECT (config
#               dir <work>/claude). Its JSON lines are passed through; a line on this
#               script's stdin stops it.
#
# The keychain is for apiKeyHelper only: the status line command Claude Code runs
# (`gatehouse-statusline --data-dir <work>/data`) reads the statusline.json the app wrote
# there, not the keychain.
#
# Every output line is JSON. Usage: statusline_session.sh <gatehouse binary> <work dir> <mode>
set -euo pipefail
bin=$1
work=$2
mode=$3
here=$(cd "$(dirname "$0")" && pwd)
# HOME and the XDG directories are the caller's (set on `dbus-run-session`, so a Secret
# Service the bus starts on demand uses them too): they must be inside the work dir.
case "$HOME:$XDG_RUNTIME_DIR" in
"$work"/*:"$work"/*) ;;
*) echo '{"error": "HOME and XDG_RUNTIME_DIR must be under the work dir"}'; exit 2 ;;
esac
mkdir -p "$HOME" "$work/data"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

json() { python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' "$@"; }

# The Secret Service, unlocked with a throwaway password. The daemon takes its bus name a
# moment after `--unlock` returns; a client asking before that makes the bus start a second
# daemon (about every other time), so wait for the name (asking whether it has an owner
# starts nothing).
eval "$(printf throwaway | gnome-keyring-daemon --unlock --components=secrets 2>"$work/keyring-$mode.err")"
for _ in $(seq 50); do
  owned=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null || true)
  [[ $owned == *"boolean true"* ]] && break
  sleep 0.1
done

case "$mode" in
claude)
  printf '%s' "$LOCAL_TOKEN" |
    secret-tool store --label='Gatehouse local token' service gatehouse username local-token
  # What Claude Code's apiKeyHelper will read.
  printed=$("$bin" --data-dir "$work/data" token --local </dev/null 2>"$work/token.err" || true)
  if [ "$printed" = "$LOCAL_TOKEN" ]; then
    json keychain "token --local prints the stored token"
  else
    json error "gatehouse token --local did not print the stored token" stderr "$(cat "$work/token.err")"
    exit 1
  fi
  unset LOCAL_TOKEN
  # Claude Code's whole environment: the session's bus and keyring, nothing else.
  CLAUDE="$CLAUDE" PROJECT="$PROJECT" PROMPT="Say hello" \
    TIMEOUT_SECS="${TIMEOUT_SECS:-150}" WATCH_SECS="${WATCH_SECS:-60}" \
    CLAUDE_ENV_PATH="$PATH" CLAUDE_ENV_HOME="$HOME" CLAUDE_ENV_TERM=xterm-256color \
    CLAUDE_ENV_LANG=C.UTF-8 \
    CLAUDE_ENV_XDG_DATA_HOME="$XDG_DATA_HOME" CLAUDE_ENV_XDG_CONFIG_HOME="$XDG_CONFIG_HOME" \
    CLAUDE_ENV_XDG_RUNTIME_DIR="$XDG_RUNTIME_DIR" \
    CLAUDE_ENV_DBUS_SESSION_BUS_ADDRESS="$DBUS_SESSION_BUS_ADDRESS" \
    CLAUDE_ENV_CLAUDE_CONFIG_DIR="$work/claude" \
    CLAUDE_ENV_CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    python3 "$here/../e2e/claude_statusline.py"
  ;;
*)
  json error "unknown mode $mode"
  exit 2
  ;;
esac
