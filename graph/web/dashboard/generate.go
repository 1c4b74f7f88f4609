// The dashboard's JavaScript is built from the npm project in this folder
// (package.json, package-lock.json, build.mjs, src/) into dist/, which is
// committed and embedded: `go build` needs neither node nor npm.
//
// `go generate ./graph/web/...` rebuilds dist/ and needs node >= 20 and npm
// with access to the npm registry. The build type-checks the TypeScript
// sources, is reproducible (the same package-lock.json gives byte-identical
// files), and records a digest of its inputs in dist/index.html that
// TestDistIsBuiltFromCurrentSources checks, so a stale dist/ fails the tests.

package dashboard

//go:generate npm ci --no-audit --no-fund
//go:generate npm run --silent build
