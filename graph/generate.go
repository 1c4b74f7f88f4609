package graph

// gqlgen generates graph/generated and graph/model/models_gen.go from the
// schema, as gqlgen.yml says.
//
//go:generate go tool gqlgen generate
