// Logging: go-hclog, as text for people or JSON for machines.

package main

import (
	"io"

	"github.com/hashicorp/go-hclog"
)

func newLogger(level, format string, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "switchyard",
		Level:      hclog.LevelFromString(level),
		JSONFormat: format == "json",
		Output:     w,
		TimeFormat: "2006-01-02T15:04:05.000Z07:00",
	})
}
