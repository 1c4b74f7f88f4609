package main

//go:generate go tool genqlient genqlient.yaml
