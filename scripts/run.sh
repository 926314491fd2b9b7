#!/usr/bin/env bash
# Sets up and runs Gatehouse. With no arguments: the headless server with the embedded
# default configuration (loopback, SQLite in the user data directory, Anthropic upstream
# with ANTHROPIC_API_KEY). Arguments are passed to `gatehouse`, e.g.
#   scripts/run.sh serve --config examples/local.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
# Building needs only the Rust toolchain and a C compiler (both on this kind of machine).
cargo build --release -p gatehouse
exec target/release/gatehouse "$@"
