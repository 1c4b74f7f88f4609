package bench

//go:generate go tool genqlient genqlient.yaml
