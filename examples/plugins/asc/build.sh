#!/bin/sh
# Builds ../asc.wasm from assembly/index.ts with the AssemblyScript compiler
# pinned in package-lock.json, twice, and fails unless the two builds are
# byte-identical. Run by `go generate ./examples/plugins`; needs node and npm.
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --silent
npx asc assembly/index.ts --config asconfig.json --target release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx asc assembly/index.ts --config asconfig.json --target release --outFile "$tmp/again.wasm"
cmp ../asc.wasm "$tmp/again.wasm"
echo "asc: ../asc.wasm from assembly/index.ts ($(wc -c < ../asc.wasm) bytes, reproducible)"
