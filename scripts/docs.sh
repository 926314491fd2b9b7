#!/usr/bin/env bash
# The Gatehouse book (docs/, an mdBook). `scripts/docs.sh` serves it at
# http://127.0.0.1:3000 and rebuilds on each save; `scripts/docs.sh --build` builds it into
# target/book; `scripts/docs.sh --regen` rewrites the generated configuration and CLI
# references (docs/reference/{config,cli}.md) from the current code. The mdbook CLI comes
# from scripts/setup.sh (pinned; installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
mdbook=$(command -v mdbook || echo "$HOME/.cargo/bin/mdbook")
if [ ! -x "$mdbook" ]; then
  echo "docs: mdbook is missing; run scripts/setup.sh (it installs the pinned version)" >&2
  exit 1
fi
if [ "${1:-}" = "--regen" ]; then
  cargo build -p gatehouse   # default features: the CLI reference documents `tray` too
  GATEHOUSE_BLESS=1 exec cargo nextest run -p gatehouse-tests --test docs -E 'test(/_reference_/)'
fi
if [ "${1:-}" = "--build" ]; then
  exec "$mdbook" build docs
fi
exec "$mdbook" serve docs -n 127.0.0.1 -p "${DOCS_PORT:-3000}"
