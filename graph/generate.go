package graph

// gqlgen generates graph/generated and graph/model/models_gen.go from the
// schema, as gqlgen.yml says; then graph/internal/seqlists points the
// marshaller of submitTasks' items at model.MarshalList, which marshals a
// shallow selection of them without a goroutine per item (gqlgen has no
// setting for it).
//
//go:generate go tool gqlgen generate
//go:generate go run ./internal/seqlists generated/tasks.generated.go marshalNSubmitTaskResult2ᚕ
