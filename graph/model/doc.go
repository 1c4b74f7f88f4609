// Package model holds the Go side of the GraphQL types in graph/schema.
//
// The big output types (Task, Lane, Stats, Instance, …) wrap the engine's
// own snapshots and expose them through methods that gqlgen binds to the
// schema's fields: nothing is copied per request beyond what a query asks
// for. Enums are bound to the engine's constants in gqlgen.yml. The task
// inputs (input.go) have unmarshallers of their own, which gqlgen.yml binds
// in place of the generated ones: a batch's input is the API's hottest
// path. The small types that need no hand-written logic are generated into
// models_gen.go.
package model
