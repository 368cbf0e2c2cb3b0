#!/usr/bin/env bash
# CI for the TypeScript SDK (sdk/typescript) and the web client (internal/web/static):
# type checks (the README's examples too), the browser bundle's freshness, the
# npm package as installed from its tarball, SDK unit tests, SDK integration
# tests against a real server, and browser tests in Debian's Chromium.
# Installs what a fresh machine lacks: Chromium (apt) and the npm packages (npm ci).
# Never downloads a browser through npm/playwright.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH=$PATH:/usr/local/go/bin; fi
command -v go >/dev/null || { echo "ts.sh needs Go"; exit 1; }
command -v node >/dev/null || { echo "ts.sh needs Node.js 20+ (and npm)"; exit 1; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { echo "ts.sh needs Node.js 20+"; exit 1; }

export CHROMIUM_PATH=${CHROMIUM_PATH:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM_PATH" ]; then
  echo "== installing Chromium from Debian's packages"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
"$CHROMIUM_PATH" --version

echo "== npm ci (sdk/typescript)"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
(cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== building the server once for the tests"
go build -o "$tmp/parley" ./cmd/parley
export PARLEY_BIN=$tmp/parley

cd sdk/typescript
echo "== type checks"
npx tsc -p tsconfig.json --noEmit
npx tsc -p tsconfig.test.json --noEmit
echo "== the README's TypeScript examples compile"
node scripts/check-readme.mjs
echo "== the web client's SDK bundle is built from the current source"
node scripts/bundle.mjs --check
echo "== the npm package: packed, installed, require()d, imported, type-checked"
node scripts/check-package.mjs
echo "== SDK unit tests"
npx vitest run --config vitest.config.ts
echo "== SDK integration tests (real server)"
npx vitest run --config vitest.integration.config.ts
echo "== browser tests (Chromium)"
npx vitest run --config vitest.browser.config.ts
echo "ts.sh passed in $(( $(date +%s) - start )) s"
