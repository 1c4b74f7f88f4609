// Package echoserver is a real gqlgen GraphQL server over a five-field
// schema, for the playground's tests: it answers a fixed query, counts over
// a subscription, and echoes the Authorization it received over HTTP and in
// the WebSocket connection_init payload. It is no part of Switchyard's API.
package echoserver

//go:generate go tool gqlgen generate --config gqlgen.yml
