// Package graph is Switchyard's GraphQL API over the engine: the schema
// (graph/schema, one .graphqls file per domain), the code gqlgen generates from it,
// the resolvers, subscriptions and the HTTP server.
//
//	graph/model        the Go side of the schema's types (wrappers of engine snapshots)
//	graph/generated    gqlgen's executable schema (generated: do not edit)
//	graph/resolvers    queries, mutations and subscriptions over the engine
//	graph/auth         tokens, roles, the access table and its gate, rate limits, the audit log
//	graph/eventstream  one subscriber's reader of the engine's event log (resume, LAGGED)
//	graph/subgate      caps the cores subscription executions take, so the engine keeps its share
//	graph/metrics      Prometheus collectors that read the engine on scrape
//	graph/server       HTTP: /graphql (POST, GET, WebSocket, SSE), limits, health, metrics, artifacts, the web apps
//	graph/client       a small GraphQL client (HTTP, WebSocket, SSE) for the CLI, tests and bench
//	graph/web          the browser apps served from embedded assets: the playground and the dashboard
//
// doc/architecture.md places these packages in the whole.
package graph

//go:generate go tool gqlgen generate
