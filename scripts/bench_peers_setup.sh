#!/usr/bin/env bash
# Installs the peers that `gatehouse-bench --peers` measures beside Gatehouse:
#   - nginx (Debian package; the benchmark runs its own instance with its own config and
#     files in a temporary directory, never the system service),
#   - LiteLLM's proxy (PyPI `litellm[proxy]`, pinned below) into a virtualenv under
#     target/peers/litellm (never system-wide),
#   - the reference gateway and the test IdP come with tests/e2e's npm packages
#     (`npm ci` in tests/e2e; scripts/setup.sh does it).
# Idempotent; needs root for apt. `bench_peers_setup.sh DIR` puts the virtualenv in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

LITELLM_VERSION="1.100.0"
venv="${1:-target/peers/litellm}"

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "bench_peers_setup: installing nginx"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nginx
fi
# Debian's package may start the system service where an init system runs; the
# benchmark does not use it.

if [ ! -x tests/e2e/node_modules/.bin/claude ]; then
  echo "bench_peers_setup: installing tests/e2e's npm packages (the reference gateway, the test IdP)"
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi

have=""
if [ -x "$venv/bin/python" ]; then
  have="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('litellm'))" 2>/dev/null || true)"
fi
if [ "$have" != "$LITELLM_VERSION" ] || [ ! -x "$venv/bin/litellm" ]; then
  echo "bench_peers_setup: installing litellm[proxy]==$LITELLM_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --disable-pip-version-check -q "litellm[proxy]==$LITELLM_VERSION"
fi
echo "bench_peers_setup: nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), litellm $LITELLM_VERSION in $venv"
echo "bench_peers_setup: run target/release/gatehouse-bench --peers --litellm $venv/bin/litellm"
