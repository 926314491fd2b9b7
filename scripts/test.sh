#!/usr/bin/env bash
# Sets up what the tests need, builds the workspace and runs every test: unit, in-process
# integration (port 0, parallel; a real PostgreSQL from scripts/postgres.sh) and end-to-end
# with the real Claude Code CLI and SDK.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export AWS_EC2_METADATA_DISABLED=true
# A throwaway PostgreSQL cluster on loopback; each store test makes its own database in it.
GATEHOUSE_TEST_POSTGRES_URL="$(scripts/postgres.sh)"
export GATEHOUSE_TEST_POSTGRES_URL
# Load the end-to-end tools once so the first tests do not pay a cold start.
(cd tests/e2e && node -e "import('oidc-provider').then(() => import('playwright-core'))" >/dev/null 2>&1) || true
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
