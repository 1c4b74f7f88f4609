module github.com/switchyard/switchyard/plugins/sdk

go 1.24
