module github.com/switchyard/switchyard

go 1.26.8

require (
	github.com/stretchr/testify v1.11.1
	github.com/tetratelabs/wazero v1.12.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.44.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
