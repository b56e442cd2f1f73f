#!/usr/bin/env bash
# Checks handlers/openapi.json with the tools integrators point at it: the
# Redocly and Spectral linters (no error, no warning), and openapi-typescript,
# whose output must type-check under `tsc --strict` with usage.ts. The Go
# client that oapi-codegen generates is checked by `go test ./handlers/openapigen`.
# Needs Node.js 20.19 or later and npm; the tools' versions are pinned in
# package-lock.json and installed into node_modules here.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null 2>&1 ||
    ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || a == 20 && b >= 19 ? 0 : 1)'; then
    echo "tools/openapi/check.sh needs Node.js 20.19 or later and npm (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi
# No telemetry or update checks from the tools (the network is closed anyway).
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true SCARF_ANALYTICS=false
doc=../../handlers/openapi.json
bin() { local tool=$1; shift; node_modules/.bin/"$tool" "$@"; }

npm ci --no-audit --no-fund --loglevel=error >/dev/null

echo "redocly lint"
# (Without the box Redocly draws about Node.js versions.)
bin redocly lint --config redocly.yaml "$doc" 2>&1 | { grep -v -e '^ *$' -e '║' -e '╔' -e '╚' || true; }

echo "spectral lint"
bin spectral lint --ruleset .spectral.yaml --fail-severity=warn "$doc"

echo "openapi-typescript"
rm -rf generated
# --default-non-nullable=false: a member with a default is still optional
# to send (EvidenceRequest.authoritative).
bin openapi-typescript "$doc" --redocly openapi-typescript.redocly.yaml --default-non-nullable=false \
    -o generated/limbo-api.d.ts

echo "tsc --noEmit --strict"
bin tsc -p tsconfig.json --noEmit --strict
echo "openapi.json: both linters clean, the TypeScript types check"
