module github.com/switchyard/switchyard

go 1.26.8
