// Package ts holds no Go code: it is the TypeScript example agent, and this
// file makes `go generate ./...` install and build it like the web apps, so
// that its operations are validated against the schema and their generated
// types (src/graphql.generated.ts) kept current with everything else.
package ts

//go:generate npm ci --no-audit --no-fund
//go:generate npm run --silent build
