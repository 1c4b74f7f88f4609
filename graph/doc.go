// Package graph is Switchyard's GraphQL API over the engine: the schema, the
// code gqlgen generates from it, the resolvers, the subscriptions, the MCP
// endpoint and the HTTP server that serves them with the browser apps. The
// engine knows nothing of any of it. Its packages, one job each:
//
//	graph/schema       the schema, one .graphqls file per domain (not Go: gqlgen reads it, see gqlgen.yml)
//	graph/model        the Go side of the schema's types (wrappers of engine snapshots)
//	graph/generated    gqlgen's executable schema, one file per schema file (generated: do not edit)
//	graph/resolvers    queries, mutations and subscriptions over the engine; input validation; agents' row rules
//	graph/auth         tokens, roles, the access table and its gate, rate limits, the audit log
//	graph/eventstream  one subscriber's reader of the engine's event log (resume, LAGGED), the hub, shared encoding
//	graph/subgate      caps the cores subscription executions take, so the engine keeps its share
//	graph/mcp          /mcp, the Model Context Protocol: browser tools that are tasks, scheduler tools, resources
//	graph/metrics      Prometheus collectors that read the engine on scrape
//	graph/server       HTTP: /graphql (POST, GET, WebSocket, SSE), /mcp, limits, health, metrics, artifacts, the web apps
//	graph/client       a small GraphQL client (HTTP, WebSocket, SSE) for the CLI, tests and bench
//	graph/internal/seqlists  run by go generate after gqlgen: submitTasks' items marshalled without a goroutine each
//	graph/web          the browser apps served from embedded assets (graph/web/README.md):
//	  web/spa            serving one built single-page app
//	  web/webbuild       what the apps' builds share, and the check that a dist/ is current
//	  web/playground     the GraphiQL playground at /
//	  web/dashboard      the live dashboard at /dashboard
//
// graph/README.md says how a request goes through them and why;
// doc/architecture.md places them in the whole.
package graph
