#!/usr/bin/env bash
# Sets up and runs Gatehouse. With no arguments: the desktop tray app when a display is
# present, else the headless server with the embedded default configuration (loopback,
# SQLite in the user data directory, Anthropic upstream with ANTHROPIC_API_KEY).
# Arguments are passed to `gatehouse`, e.g.
#   scripts/run.sh serve --config examples/local.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
# Build packages (WebKitGTK for the tray) and the dashboard the engine embeds.
scripts/setup.sh --build
# gatehouse-statusline beside gatehouse: the tray configures Claude Code's status line with it.
cargo build --release -p gatehouse -p gatehouse-statusline
exec target/release/gatehouse "$@"
